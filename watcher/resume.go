package watcher

import "errors"

// maxEmptyResumes bounds the TryNext calls in a row in which the driver resumed the stream
// and delivered nothing. The driver resumes by itself after a resumable getMore error
// (change-streams spec) and then returns from TryNext at once with an empty batch, so a
// getMore that always fails (a failing node, a fail point) would cost an aggregate and a
// getMore per call, thousands a second, with every call looking like an idle stream. A
// single fault costs one such call; the second in a row ends the stream with
// errResumeLoop, and Run's capped, jittered backoff takes over.
const maxEmptyResumes = 2

// errResumeLoop ends a stream whose getMores keep failing behind the driver's resumes.
var errResumeLoop = errors.New("the stream's getMores keep failing: the driver resumed it twice in a row without delivering an event")
