package embedded

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// failPoints holds the failCommand fail point, configured by configureFailPoint exactly as
// mongod's test command (enabled only with EnableTestCommands).
type failPoints struct {
	mu sync.Mutex
	fc *failCommand
}

type failCommand struct {
	alwaysOn  bool
	times     int64 // remaining activations when !alwaysOn
	skip      int64 // matching commands to let through first
	commands  map[string]bool
	closeConn bool
	code      int32
	hasCode   bool
	labels    []string
	hasLabels bool
	wcErr     bson.D
	block     time.Duration
	appName   string
	entered   int64
}

// failAction is what an activated fail point does to one command.
type failAction struct {
	err    error
	wcErr  bson.D
	labels []string
}

func newFailPoints() *failPoints { return &failPoints{} }

// retryableCodes are the error codes mongod labels RetryableWriteError (retryable-writes spec).
func isRetryableCode(code int32) bool {
	switch code {
	case 6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436, 63, 150, 134:
		return true
	}
	return false
}

func isRetryableWriteCommand(r *request) bool {
	switch r.name {
	case "insert", "update", "delete", "findAndModify", "findandmodify":
		return r.txnNumber != nil
	}
	return false
}

// evaluate consumes one activation of the fail point for this command, if it applies, blocks
// when asked, and returns what to do. It returns errCloseConnection for closeConnection.
func (fp *failPoints) evaluate(ctx context.Context, name string, cs *connState, r *request) (*failAction, error) {
	fp.mu.Lock()
	fc := fp.fc
	if fc == nil || !fc.commands[name] || (fc.appName != "" && fc.appName != cs.appName) {
		fp.mu.Unlock()
		return nil, nil
	}
	if fc.skip > 0 {
		fc.skip--
		fp.mu.Unlock()
		return nil, nil
	}
	if !fc.alwaysOn {
		fc.times--
		if fc.times <= 0 {
			fp.fc = nil
		}
	}
	fc.entered++
	fp.mu.Unlock()

	if fc.block > 0 {
		t := time.NewTimer(fc.block)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	if fc.closeConn {
		return nil, errCloseConnection
	}
	labels := fc.labels
	act := &failAction{}
	if fc.hasCode {
		if !fc.hasLabels && isRetryableCode(fc.code) && isRetryableWriteCommand(r) {
			labels = []string{"RetryableWriteError"}
		}
		act.err = &mongoerr.Error{Code: fc.code, Msg: "Failing command via 'failCommand' failpoint", Labels: labels}
		return act, nil
	}
	if fc.wcErr != nil {
		if !fc.hasLabels && isRetryableWriteCommand(r) {
			if c, ok := toInt64(valueOf(fc.wcErr, "code")); ok && isRetryableCode(int32(c)) {
				labels = []string{"RetryableWriteError"}
			}
		}
		act.wcErr, act.labels = fc.wcErr, labels
		return act, nil
	}
	return nil, nil
}

func valueOf(d bson.D, key string) any {
	v, _ := bsonval.Get(d, key)
	return v
}

func cmdConfigureFailPoint(_ context.Context, s *Server, r *request) (result, error) {
	if r.db != "admin" {
		return result{}, mongoerr.New(mongoerr.Unauthorized, "configureFailPoint may only be run against the admin database.")
	}
	name, _ := r.body[0].Value.(string)
	if name != "failCommand" {
		return result{}, mongoerr.NotImplementedf("fail point '%s' (only failCommand)", name)
	}
	fc := &failCommand{commands: map[string]bool{}}
	modeV, ok := r.arg("mode")
	if !ok {
		return result{}, mongoerr.New(mongoerr.IllegalOperation, "missing mode")
	}
	off := false
	switch m := modeV.(type) {
	case string:
		switch m {
		case "alwaysOn":
			fc.alwaysOn = true
		case "off":
			off = true
		default:
			return result{}, mongoerr.BadValuef("unknown mode: %s", m)
		}
	case bson.D:
		if len(m) != 1 {
			return result{}, mongoerr.BadValuef("mode object must have exactly one of times, skip")
		}
		n, ok := toInt64(m[0].Value)
		if !ok || n < 0 {
			return result{}, mongoerr.BadValuef("mode.%s must be a non-negative integer", m[0].Key)
		}
		switch m[0].Key {
		case "times":
			fc.times = n
			off = n == 0
		case "skip":
			fc.skip, fc.alwaysOn = n, true
		case "activationProbability":
			return result{}, mongoerr.NotImplementedf("fail point mode activationProbability")
		default:
			return result{}, mongoerr.BadValuef("unknown mode field: %s", m[0].Key)
		}
	default:
		return result{}, mongoerr.TypeMismatchf("mode must be a string or an object")
	}
	if dataV, ok := r.arg("data"); ok {
		if err := fc.parseData(asDoc(dataV)); err != nil {
			return result{}, err
		}
	}
	s.fail.mu.Lock()
	var count int64
	if s.fail.fc != nil {
		count = s.fail.fc.entered
	}
	if off {
		s.fail.fc = nil
	} else {
		if len(fc.commands) == 0 {
			s.fail.mu.Unlock()
			return result{}, mongoerr.BadValuef("failCommand requires data.failCommands")
		}
		s.fail.fc = fc
	}
	s.fail.mu.Unlock()
	return result{fields: bson.D{{Key: "count", Value: count}}}, nil
}

func (fc *failCommand) parseData(d bson.D) error {
	blockConn, blockMS := false, int64(-1)
	for _, e := range d {
		switch e.Key {
		case "failCommands":
			arr, ok := e.Value.(bson.A)
			if !ok {
				return mongoerr.TypeMismatchf("failCommands must be an array of command names")
			}
			for _, v := range arr {
				name, ok := v.(string)
				if !ok {
					return mongoerr.TypeMismatchf("failCommands must be an array of command names")
				}
				fc.commands[name] = true
			}
		case "closeConnection":
			fc.closeConn = boolArg(e.Value)
		case "errorCode":
			n, ok := toInt64(e.Value)
			if !ok {
				return mongoerr.TypeMismatchf("errorCode must be an integer")
			}
			fc.code, fc.hasCode = int32(n), true
		case "errorLabels":
			arr, ok := e.Value.(bson.A)
			if !ok {
				return mongoerr.TypeMismatchf("errorLabels must be an array of strings")
			}
			fc.hasLabels = true
			fc.labels = []string{}
			for _, v := range arr {
				l, ok := v.(string)
				if !ok {
					return mongoerr.TypeMismatchf("errorLabels must be an array of strings")
				}
				fc.labels = append(fc.labels, l)
			}
		case "writeConcernError":
			wc, ok := e.Value.(bson.D)
			if !ok {
				return mongoerr.TypeMismatchf("writeConcernError must be an object")
			}
			fc.wcErr = wc
		case "blockConnection":
			blockConn = boolArg(e.Value)
		case "blockTimeMS":
			n, ok := toInt64(e.Value)
			if !ok || n < 0 {
				return mongoerr.TypeMismatchf("blockTimeMS must be a non-negative integer")
			}
			blockMS = n
		case "appName":
			name, ok := e.Value.(string)
			if !ok {
				return mongoerr.TypeMismatchf("appName must be a string")
			}
			fc.appName = name
		case "failInternalCommands":
		default:
			return mongoerr.NotImplementedf("failCommand data field '%s'", e.Key)
		}
	}
	if blockConn {
		if blockMS < 0 {
			return mongoerr.BadValuef("blockConnection requires blockTimeMS")
		}
		fc.block = time.Duration(blockMS) * time.Millisecond
	}
	return nil
}
