package embedded_test

import (
	"bufio"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded"
	"github.com/gameops/rollup/embedded/embeddedtest"
	"github.com/gameops/rollup/embedded/wire"
)

// withDB appends "$db": db to a BSON document; invalid documents are returned unchanged.
func withDB(doc []byte, db string) []byte {
	if bson.Raw(doc).Validate() != nil {
		return doc
	}
	out := append([]byte{}, doc[:len(doc)-1]...)
	out = append(out, 0x02)
	out = append(out, "$db"...)
	out = append(out, 0)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(db)+1))
	out = append(out, db...)
	out = append(out, 0, 0)
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}

// FuzzCommand sends arbitrary command bodies (mutations of real commands) to one server: it
// must answer every message or close the connection for a framing error, never crash or
// hang, and keep serving new connections.
func FuzzCommand(f *testing.F) {
	store := embeddedtest.Start(f, embeddedtest.Options{Configure: func(c *embedded.Config) {
		c.EnableTestCommands = false // a fuzzed fail point would break the liveness check
		c.Logger = zap.NewNop()      // logging to f inside the fuzz target is not allowed
	}})
	store.SkipIfReal(f)
	D := func(kv ...any) bson.D {
		var d bson.D
		for i := 0; i < len(kv); i += 2 {
			d = append(d, bson.E{Key: kv[i].(string), Value: kv[i+1]})
		}
		return d
	}
	seeds := []bson.D{
		D("ping", 1),
		D("hello", 1, "helloOk", true),
		D("insert", "c", "documents", bson.A{D("_id", 1, "a", bson.A{1, D("b", 2)}), D("x", "s")}, "ordered", false),
		D("update", "c", "updates", bson.A{D("q", D("a", D("$gt", 1)), "u", D("$set", D("b.c", 1), "$inc", D("n", 1)), "upsert", true, "multi", true)}),
		D("update", "c", "updates", bson.A{D("q", D("_id", 1), "u", D("$push", D("l", D("$each", bson.A{1, 2})), "$pull", D("m", D("$in", bson.A{1}))))}),
		D("delete", "c", "deletes", bson.A{D("q", D("a", D("$in", bson.A{1, 2})), "limit", 0)}),
		D("find", "c", "filter", D("$or", bson.A{D("a", 1), D("b.c", D("$exists", true))}), "sort", D("a", -1), "projection", D("a", 1), "skip", 1, "limit", 5, "batchSize", 2),
		D("findAndModify", "c", "query", D("a", 1), "update", D("$max", D("a", 5)), "new", true, "upsert", true, "fields", D("_id", 0)),
		D("aggregate", "c", "pipeline", bson.A{D("$match", D("a", D("$ne", nil))), D("$unwind", "$a"), D("$group", D("_id", "$x", "s", D("$sum", "$a"), "p", D("$push", "$$ROOT"))), D("$sort", D("s", 1)), D("$project", D("t", D("$add", bson.A{"$s", 1})))}, "cursor", D()),
		D("count", "c", "query", D("a", D("$not", D("$lt", 3)))),
		D("distinct", "c", "key", "a.b", "query", D()),
		D("createIndexes", "c", "indexes", bson.A{D("key", D("a", 1, "b", -1), "name", "ab", "unique", true)}),
		D("listIndexes", "c"),
		D("dropIndexes", "c", "index", "*"),
		D("listCollections", 1, "filter", D("name", "c")),
		D("getMore", int64(1), "collection", "c"),
		D("killCursors", "c", "cursors", bson.A{int64(1)}),
		D("drop", "c"),
	}
	for _, s := range seeds {
		raw, err := bson.Marshal(s)
		if err != nil {
			f.Fatalf("marshal seed: %v", err)
		}
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		conn, err := net.DialTimeout("tcp", store.Server.Addr(), 5*time.Second)
		if err != nil {
			t.Fatalf("server not accepting connections: %v", err)
		}
		defer conn.Close()
		msg := wire.AppendMsg(nil, 1, 0, 0, withDB(body, "fuzz"))
		if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			t.Fatalf("deadline: %v", err)
		}
		if _, err := conn.Write(msg); err != nil {
			return // the server may close at once on a framing error
		}
		h, reply, err := wire.ReadMessage(bufio.NewReader(conn), wire.DefaultMaxMessageSize)
		if err != nil {
			var ne net.Error
			if errorsAs(err, &ne) && ne.Timeout() {
				t.Fatalf("no reply within 10 s to %x", body)
			}
			return // the server closes the connection on framing and other connection-fatal errors
		}
		if h.OpCode != wire.OpMsg || h.ResponseTo != 1 {
			t.Fatalf("reply header %+v", h)
		}
		m, err := wire.ParseMsg(reply)
		if err != nil {
			t.Fatalf("unparsable reply: %v", err)
		}
		var r struct {
			OK   float64 `bson:"ok"`
			Code int32   `bson:"code"`
		}
		if err := bson.Unmarshal(m.Body, &r); err != nil {
			t.Fatalf("reply body: %v", err)
		}
		if r.OK == 0 && r.Code == 0 {
			t.Fatalf("error reply without a code: %v", m.Body)
		}
		if r.Code == 1 { // InternalError: a server bug surfaced as an error
			t.Fatalf("InternalError for %v: %v", bson.Raw(withDB(body, "fuzz")), m.Body)
		}
	})
}

// errorsAs is errors.As for a net.Error target.
func errorsAs(err error, target *net.Error) bool { return errors.As(err, target) }
