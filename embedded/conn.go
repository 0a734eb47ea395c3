package embedded

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.uber.org/zap"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/wire"
)

// connState is what the server remembers about one client connection.
type connState struct {
	id      int64
	remote  string
	appName string
	netConn net.Conn
}

// errCloseConnection asks the connection loop to close the connection without replying (the
// failCommand fail point's closeConnection).
var errCloseConnection = errors.New("close connection")

func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	cs := &connState{id: s.connIDs.Add(1), remote: c.RemoteAddr().String(), netConn: c}
	log := s.log.With(zap.Int64("conn", cs.id))
	log.Debug("connection accepted", zap.String("remote", cs.remote))
	r := bufio.NewReaderSize(c, 64<<10)
	var out []byte
	for {
		h, msg, err := wire.ReadMessage(r, wire.DefaultMaxMessageSize)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				log.Debug("connection read failed", zap.Error(err))
			}
			return
		}
		out = out[:0]
		var reply []byte
		switch h.OpCode {
		case wire.OpMsg:
			reply, err = s.handleMsg(ctx, cs, h, msg, out)
		case wire.OpQuery:
			reply, err = s.handleQuery(ctx, cs, h, msg, out)
		default:
			log.Debug("unsupported op code, closing", zap.Int32("opCode", h.OpCode))
			return
		}
		if err != nil {
			if !errors.Is(err, errCloseConnection) {
				log.Debug("closing connection", zap.Error(err))
			}
			return
		}
		if reply == nil {
			continue // moreToCome request: no reply
		}
		if _, err := c.Write(reply); err != nil {
			return
		}
		out = reply
	}
}

// handleMsg runs one OP_MSG command and returns the encoded reply (nil when the client set
// moreToCome, i.e. an unacknowledged write).
func (s *Server) handleMsg(ctx context.Context, cs *connState, h wire.Header, msg, out []byte) ([]byte, error) {
	m, err := wire.ParseMsg(msg)
	if err != nil {
		if wire.IsConnectionFatal(err) {
			return nil, err
		}
		return s.encodeMsgReply(out, h, s.errorReply(err, bson.Timestamp{}))
	}
	body, err := decodeCommand(m)
	if err != nil {
		return s.encodeMsgReply(out, h, s.errorReply(err, bson.Timestamp{}))
	}
	reply, err := s.execute(ctx, cs, body)
	if err != nil {
		return nil, err
	}
	if m.Flags&wire.FlagMoreToCome != 0 {
		return nil, nil
	}
	return s.encodeMsgReply(out, h, reply)
}

func (s *Server) encodeMsgReply(out []byte, h wire.Header, reply bson.D) ([]byte, error) {
	raw, err := bsonval.Encode(reply)
	if err != nil {
		raw, _ = bsonval.Encode(s.errorReply(mongoerr.New(mongoerr.InternalError, "encode reply: %v", err), bson.Timestamp{}))
	}
	return wire.AppendMsg(out, s.nextRequestID(), h.RequestID, 0, raw), nil
}

// handleQuery answers the legacy OP_QUERY handshake (hello/isMaster on admin.$cmd). Any
// other OP_QUERY is refused as mongod 5.1+ does.
func (s *Server) handleQuery(ctx context.Context, cs *connState, h wire.Header, msg, out []byte) ([]byte, error) {
	q, err := wire.ParseQuery(msg)
	if err != nil {
		return nil, err
	}
	var reply bson.D
	cmdRaw := q.Command()
	name := strings.ToLower(wire.CommandName(cmdRaw))
	if !strings.HasSuffix(q.FullCollectionName, ".$cmd") || (name != "hello" && name != "ismaster") {
		reply = s.errorReply(mongoerr.New(352, "Unsupported OP_QUERY command: %s. The client driver may require an upgrade.", name), bson.Timestamp{})
	} else {
		body, derr := bsonval.Decode(cmdRaw)
		if derr != nil {
			reply = s.errorReply(mongoerr.New(wire.CodeInvalidBSON, "invalid BSON in OP_QUERY: %v", derr), bson.Timestamp{})
		} else {
			db, _, _ := strings.Cut(q.FullCollectionName, ".")
			body = bsonval.Set(body, "$db", db)
			if reply, err = s.execute(ctx, cs, body); err != nil {
				return nil, err
			}
		}
	}
	raw, err := bsonval.Encode(reply)
	if err != nil {
		return nil, err
	}
	return wire.AppendReply(out, s.nextRequestID(), h.RequestID, 8 /* AwaitCapable */, raw), nil
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
