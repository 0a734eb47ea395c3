package clientconn

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/wire"
)

// Handler runs the commands a connection receives.
type Handler interface {
	// Handle runs one command (its body, "$db" included) sent on c and returns the complete
	// reply document. An error closes the connection without a reply (ErrCloseConnection
	// does so without logging).
	Handle(ctx context.Context, c *Conn, cmd bson.D) (bson.D, error)
	// ErrorReply renders err as an error reply, for requests the connection layer refuses.
	ErrorReply(err error) bson.D
}

// ErrCloseConnection is what a Handler returns to close the connection without replying, as
// a fail point asks.
var ErrCloseConnection = errors.New("close connection")

// Conn is what the server knows about one client connection. Its commands run one at a
// time, on the connection's goroutine.
type Conn struct {
	// ID numbers connections from 1 in accept order (hello's connectionId).
	ID int64
	// Remote is the client's address.
	Remote  string
	appName string
	// Auth is the connection's authentication state, owned by the Handler (nil until it
	// sets one).
	Auth any
	// exhaust is the exhaustAllowed flag of the OP_MSG being handled.
	exhaust bool
}

// ExhaustAllowed reports whether the request being handled set OP_MSG's exhaustAllowed flag
// (the client would read a stream of replies).
func (c *Conn) ExhaustAllowed() bool { return c.exhaust }

// AppName is the application name the client's handshake gave (SetAppName), "" if none.
func (c *Conn) AppName() string { return c.appName }

// SetAppName records the application name of the client's handshake (hello's
// client.application.name).
func (c *Conn) SetAppName(name string) { c.appName = name }

// serve reads requests from nc and writes their replies until the connection ends.
func (l *Listener) serve(ctx context.Context, nc net.Conn) {
	cs := &Conn{ID: l.connIDs.Add(1), Remote: nc.RemoteAddr().String()}
	log := l.log.With(zap.Int64("conn", cs.ID))
	log.Debug("connection accepted", zap.String("remote", cs.Remote))
	st, ok := l.transport(ctx, nc, log)
	if !ok {
		return
	}
	h := l.h
	if st.refuse != nil {
		h = refuser{l.h, st.refuse}
	}
	r := bufio.NewReaderSize(st.r, 64<<10)
	// Requests are read into the last one's buffer: the command is done with a request (it
	// keeps decoded copies, never its bytes) before the next is read.
	in := wire.NewMessageReader(r, wire.DefaultMaxMessageSize)
	var out []byte // the last reply's buffer, reused
	for {
		hdr, msg, err := in.Next()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				log.Debug("connection read failed", zap.Error(err))
			}
			return
		}
		out = out[:0]
		var reply []byte
		switch hdr.OpCode {
		case wire.OpMsg:
			reply, err = l.handleMsg(ctx, h, cs, hdr, msg, out)
		case wire.OpQuery:
			reply, err = l.handleQuery(ctx, h, cs, hdr, msg, out)
		default:
			log.Debug("unsupported op code, closing", zap.Int32("opCode", hdr.OpCode))
			return
		}
		if err != nil {
			if !errors.Is(err, ErrCloseConnection) {
				log.Debug("closing connection", zap.Error(err))
			}
			return
		}
		if reply == nil {
			continue // moreToCome request: no reply
		}
		if _, err := st.w.Write(reply); err != nil || st.refuse != nil {
			return
		}
		out = reply
	}
}

// handleMsg runs one OP_MSG command and returns the encoded reply (nil when the client set
// moreToCome, i.e. an unacknowledged write).
func (l *Listener) handleMsg(ctx context.Context, hd Handler, cs *Conn, h wire.Header, msg, out []byte) ([]byte, error) {
	m, err := wire.ParseMsg(msg)
	if err != nil {
		if wire.IsConnectionFatal(err) {
			return nil, err
		}
		return l.encodeMsgReply(out, h, l.h.ErrorReply(err))
	}
	body, err := decodeCommand(m)
	if err != nil {
		return l.encodeMsgReply(out, h, l.h.ErrorReply(err))
	}
	cs.exhaust = m.Flags&wire.FlagExhaustAllowed != 0
	reply, err := hd.Handle(ctx, cs, body)
	cs.exhaust = false
	if err != nil {
		return nil, err
	}
	if m.Flags&wire.FlagMoreToCome != 0 {
		return nil, nil
	}
	return l.encodeMsgReply(out, h, reply)
}

// encodeMsgReply appends reply as an OP_MSG answering h to out (the connection's buffer, grown
// once to the reply's size).
func (l *Listener) encodeMsgReply(out []byte, h wire.Header, reply bson.D) ([]byte, error) {
	id := l.nextRequestID()
	out = slices.Grow(out, wire.HeaderSize+5+bsonval.DocSize(reply))
	msg, err := wire.AppendMsgBody(out, id, h.RequestID, func(dst []byte) ([]byte, error) {
		return bsonval.AppendDocument(dst, reply)
	})
	if err != nil {
		raw, _ := bsonval.Encode(l.h.ErrorReply(mongoerr.New(mongoerr.InternalError, "encode reply: %v", err)))
		return wire.AppendMsg(out, id, h.RequestID, 0, raw), nil
	}
	return msg, nil
}

// handleQuery answers the legacy OP_QUERY handshake (hello/isMaster on admin.$cmd). Any
// other OP_QUERY is refused as mongod 5.1+ does.
func (l *Listener) handleQuery(ctx context.Context, hd Handler, cs *Conn, h wire.Header, msg, out []byte) ([]byte, error) {
	q, err := wire.ParseQuery(msg)
	if err != nil {
		return nil, err
	}
	var reply bson.D
	cmdRaw := q.Command()
	name := strings.ToLower(wire.CommandName(cmdRaw))
	if !strings.HasSuffix(q.FullCollectionName, ".$cmd") || (name != "hello" && name != "ismaster") {
		reply = l.h.ErrorReply(mongoerr.New(352, "Unsupported OP_QUERY command: %s. The client driver may require an upgrade.", name))
	} else {
		body, derr := bsonval.Decode(cmdRaw)
		if derr != nil {
			reply = l.h.ErrorReply(mongoerr.New(wire.CodeInvalidBSON, "invalid BSON in OP_QUERY: %v", derr))
		} else {
			db, _, _ := strings.Cut(q.FullCollectionName, ".")
			body = bsonval.Set(body, "$db", db)
			if reply, err = hd.Handle(ctx, cs, body); err != nil {
				return nil, err
			}
		}
	}
	raw, err := bsonval.Encode(reply)
	if err != nil {
		return nil, err
	}
	return wire.AppendReply(out, l.nextRequestID(), h.RequestID, 8 /* AwaitCapable */, raw), nil
}

// decodeCommand decodes an OP_MSG body and merges its document sequences into it as arrays.
func decodeCommand(m wire.Msg) (bson.D, error) {
	body, err := bsonval.Decode(m.Body)
	if err != nil {
		return nil, mongoerr.New(wire.CodeInvalidBSON, "invalid command BSON: %v", err)
	}
	for _, seq := range m.Sequences {
		arr := make(bson.A, 0, len(seq.Docs))
		for _, d := range seq.Docs {
			doc, err := bsonval.Decode(d)
			if err != nil {
				return nil, mongoerr.New(wire.CodeInvalidBSON, "invalid BSON in document sequence %q: %v", seq.Identifier, err)
			}
			arr = append(arr, doc)
		}
		if _, dup := bsonval.Get(body, seq.Identifier); dup {
			return nil, mongoerr.New(40413, "Duplicate field '%s' in command body and document sequence", seq.Identifier)
		}
		body = append(body, bson.E{Key: seq.Identifier, Value: arr})
	}
	return body, nil
}

// refuser answers every command with err (a connection refused after its first request).
type refuser struct {
	Handler
	err error
}

func (r refuser) Handle(context.Context, *Conn, bson.D) (bson.D, error) {
	return r.ErrorReply(r.err), nil
}
