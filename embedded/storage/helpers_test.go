package storage

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

func openMem(t testing.TB) *Engine {
	t.Helper()
	e, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close() })
	return e
}

func mustWrite(t testing.TB, e *Engine, fn func(w *Writer) error) OpTime {
	t.Helper()
	ts, err := e.Write(context.Background(), fn)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	return ts
}

func ids(e *Engine, db, coll string, filter bson.D) []any {
	var out []any
	e.Read(func(r *Reader) {
		r.Find(db, coll, filter, func(d *Doc) bool {
			out = append(out, d.ID())
			return true
		})
	})
	return out
}

func d(kv ...any) bson.D {
	out := make(bson.D, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		v := kv[i+1]
		if n, ok := v.(int); ok {
			v = int32(n)
		}
		out = append(out, bson.E{Key: kv[i].(string), Value: v})
	}
	return out
}
