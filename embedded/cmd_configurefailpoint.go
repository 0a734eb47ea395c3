package embedded

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/mongoerr"
)

func cmdConfigureFailPoint(_ context.Context, s *Server, r *request) (result, error) {
	if r.db != "admin" {
		return result{}, mongoerr.New(mongoerr.Unauthorized, "configureFailPoint may only be run against the admin database.")
	}
	name, _ := r.body[0].Value.(string)
	switch name {
	case fpFailCommand, fpTxnWrite, fpGetMore:
	default:
		return result{}, mongoerr.NotImplementedf("fail point '%s' (only %s, %s and %s)", name, fpFailCommand, fpTxnWrite, fpGetMore)
	}
	fp, off, err := parseFailMode(r)
	if err != nil {
		return result{}, err
	}
	data := asDoc(valueOr(r, "data"))
	switch name {
	case fpFailCommand:
		fp.cmd, err = parseFailCommandData(data)
		if err == nil && !off && len(fp.cmd.commands) == 0 {
			err = mongoerr.BadValuef("failCommand requires data.failCommands")
		}
	case fpTxnWrite:
		fp.write, err = parseTxnWriteData(data)
	case fpGetMore:
		fp.getMore, err = parseGetMoreData(data)
	}
	if err != nil {
		return result{}, err
	}
	s.fail.mu.Lock()
	count := s.fail.entered[name]
	s.fail.entered[name] = 0
	s.fail.remove(name)
	if !off {
		s.fail.points[name] = fp
		s.fail.armed.Add(1)
	}
	s.fail.mu.Unlock()
	return result{fields: bson.D{{Key: "count", Value: count}}}, nil
}

func valueOr(r *request, key string) any {
	v, _ := r.arg(key)
	return v
}

// parseFailMode reads configureFailPoint's mode: "alwaysOn", "off", {times: n} or {skip: n}.
func parseFailMode(r *request) (fp *failPoint, off bool, err error) {
	fp = &failPoint{}
	modeV, ok := r.arg("mode")
	if !ok {
		return nil, false, mongoerr.New(mongoerr.IllegalOperation, "missing mode")
	}
	switch m := modeV.(type) {
	case string:
		switch m {
		case "alwaysOn":
			fp.alwaysOn = true
		case "off":
			off = true
		default:
			return nil, false, mongoerr.BadValuef("unknown mode: %s", m)
		}
	case bson.D:
		if len(m) != 1 {
			return nil, false, mongoerr.BadValuef("mode object must have exactly one of times, skip")
		}
		if m[0].Key == "activationProbability" {
			return nil, false, mongoerr.NotImplementedf("fail point mode activationProbability")
		}
		n, ok := toInt64(m[0].Value)
		if !ok || n < 0 {
			return nil, false, mongoerr.BadValuef("mode.%s must be a non-negative integer", m[0].Key)
		}
		switch m[0].Key {
		case "times":
			fp.times = n
			off = n == 0
		case "skip":
			fp.skip, fp.alwaysOn = n, true
		default:
			return nil, false, mongoerr.BadValuef("unknown mode field: %s", m[0].Key)
		}
	default:
		return nil, false, mongoerr.TypeMismatchf("mode must be a string or an object")
	}
	return fp, off, nil
}

func parseFailCommandData(d bson.D) (*failCommandData, error) {
	fc := &failCommandData{commands: map[string]bool{}}
	blockConn, blockMS := false, int64(-1)
	for _, e := range d {
		switch e.Key {
		case "failCommands":
			arr, ok := e.Value.(bson.A)
			if !ok {
				return nil, mongoerr.TypeMismatchf("failCommands must be an array of command names")
			}
			for _, v := range arr {
				name, ok := v.(string)
				if !ok {
					return nil, mongoerr.TypeMismatchf("failCommands must be an array of command names")
				}
				fc.commands[name] = true
			}
		case "closeConnection":
			fc.closeConn = boolArg(e.Value)
		case "errorCode":
			code, err := errorCodeArg(e.Value)
			if err != nil {
				return nil, err
			}
			fc.code, fc.hasCode = code, true
		case "errorLabels":
			arr, ok := e.Value.(bson.A)
			if !ok {
				return nil, mongoerr.TypeMismatchf("errorLabels must be an array of strings")
			}
			fc.hasLabels = true
			fc.labels = []string{}
			for _, v := range arr {
				l, ok := v.(string)
				if !ok {
					return nil, mongoerr.TypeMismatchf("errorLabels must be an array of strings")
				}
				fc.labels = append(fc.labels, l)
			}
		case "writeConcernError":
			wc, ok := e.Value.(bson.D)
			if !ok {
				return nil, mongoerr.TypeMismatchf("writeConcernError must be an object")
			}
			fc.wcErr = wc
		case "blockConnection":
			blockConn = boolArg(e.Value)
		case "blockTimeMS":
			n, ok := toInt64(e.Value)
			if !ok || n < 0 {
				return nil, mongoerr.TypeMismatchf("blockTimeMS must be a non-negative integer")
			}
			blockMS = n
		case "appName":
			name, ok := e.Value.(string)
			if !ok {
				return nil, mongoerr.TypeMismatchf("appName must be a string")
			}
			fc.appName = name
		case "failInternalCommands":
		default:
			return nil, mongoerr.NotImplementedf("failCommand data field '%s'", e.Key)
		}
	}
	if blockConn {
		if blockMS < 0 {
			return nil, mongoerr.BadValuef("blockConnection requires blockTimeMS")
		}
		fc.block = time.Duration(blockMS) * time.Millisecond
	}
	return fc, nil
}

// parseTxnWriteData reads onPrimaryTransactionalWrite's data. As in mongod, closeConnection
// defaults to true: a fail point with no data applies the statement and drops the reply.
func parseTxnWriteData(d bson.D) (*txnWriteData, error) {
	tw := &txnWriteData{closeConn: true}
	for _, e := range d {
		switch e.Key {
		case "closeConnection":
			tw.closeConn = boolArg(e.Value)
		case "failBeforeCommitExceptionCode":
			code, err := errorCodeArg(e.Value)
			if err != nil {
				return nil, err
			}
			tw.failCode, tw.failBefore = code, true
		default:
			return nil, mongoerr.NotImplementedf("onPrimaryTransactionalWrite data field '%s'", e.Key)
		}
	}
	return tw, nil
}

// parseGetMoreData reads failGetMoreAfterCursorCheckout's data: errorCode (default
// InternalError) and the appName filter it shares with failCommand. mongod reads nothing
// else from it (closeConnection, errorLabels: the error's labels are the server's own), so
// those fields are accepted and have no effect here either.
func parseGetMoreData(d bson.D) (*getMoreData, error) {
	gm := &getMoreData{code: mongoerr.InternalError}
	for _, e := range d {
		switch e.Key {
		case "errorCode":
			code, err := errorCodeArg(e.Value)
			if err != nil {
				return nil, err
			}
			gm.code = code
		case "appName":
			name, ok := e.Value.(string)
			if !ok {
				return nil, mongoerr.TypeMismatchf("appName must be a string")
			}
			gm.appName = name
		case "closeConnection", "errorLabels", "failInternalCommands":
		default:
			return nil, mongoerr.NotImplementedf("failGetMoreAfterCursorCheckout data field '%s'", e.Key)
		}
	}
	return gm, nil
}

func errorCodeArg(v any) (int32, error) {
	n, ok := toInt64(v)
	if !ok || n != int64(int32(n)) {
		return 0, mongoerr.TypeMismatchf("errorCode must be an integer")
	}
	return int32(n), nil
}
