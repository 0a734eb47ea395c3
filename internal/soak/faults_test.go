package soak

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/blackpipe"
)

// play runs a round's events, each at its time from start (or, within a lane, once the
// lane's previous event has ended: a store restart can take longer than planned), and
// returns when every one has ended and been healed (a fail point off, the proxy, store or
// serve running again).
func (w *world) play(ctx context.Context, start time.Time, events []event, applied *[numKinds]atomic.Int64) error {
	var lanes [4][]event
	for _, e := range events {
		lanes[e.kind.lane()] = append(lanes[e.kind.lane()], e)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(events))
	for _, lane := range lanes {
		wg.Go(func() {
			for _, e := range lane {
				if d := time.Until(start.Add(e.at)); d > 0 {
					pause(d)
				}
				w.log.logf("fault: %v", e)
				if err := w.apply(ctx, e); err != nil {
					errs <- fmt.Errorf("%v: %w", e, err)
					return
				}
				applied[e.kind].Add(1)
				w.log.logf("healed: %v", e.kind)
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// apply plays one event and heals it.
func (w *world) apply(ctx context.Context, e event) error {
	failCommand := func(mode any, data bson.D) error {
		return w.failPoint(ctx, bson.D{{Key: "configureFailPoint", Value: "failCommand"}, {Key: "mode", Value: mode},
			{Key: "data", Value: append(data, bson.E{Key: "appName", Value: "rollup"})}})
	}
	off := func(name string) error {
		return w.failPoint(ctx, bson.D{{Key: "configureFailPoint", Value: name}, {Key: "mode", Value: "off"}})
	}
	hold := func(name string, err error) error {
		if err != nil {
			return err
		}
		pause(e.dur)
		return off(name)
	}
	switch e.kind {
	case fNotWritable:
		return hold("failCommand", failCommand("alwaysOn", bson.D{{Key: "failCommands", Value: writeCmds},
			{Key: "errorCode", Value: int32(10107)}, {Key: "errorLabels", Value: bson.A{"RetryableWriteError"}}}))
	case fCloseConn:
		return hold("failCommand", failCommand("alwaysOn", bson.D{{Key: "failCommands", Value: allCmds}, {Key: "closeConnection", Value: true}}))
	case fSlow:
		return hold("failCommand", failCommand("alwaysOn", bson.D{{Key: "failCommands", Value: allCmds},
			{Key: "blockConnection", Value: true}, {Key: "blockTimeMS", Value: int32(e.n)}}))
	case fErrorTimes:
		return failCommand(bson.D{{Key: "times", Value: int32(e.n)}}, bson.D{{Key: "failCommands", Value: e.cmds}, {Key: "errorCode", Value: e.code}})
	case fWriteConcern:
		return failCommand(bson.D{{Key: "times", Value: int32(e.n)}}, bson.D{{Key: "failCommands", Value: bson.A{"update"}},
			{Key: "writeConcernError", Value: bson.D{{Key: "code", Value: int32(64)}, {Key: "codeName", Value: "WriteConcernFailed"},
				{Key: "errmsg", Value: "waiting for replication timed out"}}}})
	case fReplyLost:
		mode := any(bson.D{{Key: "times", Value: int32(e.n)}})
		if e.dur > 0 {
			mode = "alwaysOn"
		}
		err := w.failPoint(ctx, bson.D{{Key: "configureFailPoint", Value: "onPrimaryTransactionalWrite"}, {Key: "mode", Value: mode},
			{Key: "data", Value: bson.D{{Key: "closeConnection", Value: true}}}})
		if e.dur == 0 {
			return err
		}
		return hold("onPrimaryTransactionalWrite", err)
	case fGetMore:
		return w.failPoint(ctx, bson.D{{Key: "configureFailPoint", Value: "failGetMoreAfterCursorCheckout"},
			{Key: "mode", Value: bson.D{{Key: "times", Value: int32(e.n)}}},
			{Key: "data", Value: bson.D{{Key: "errorCode", Value: e.code}, {Key: "appName", Value: "rollup"}}}})
	case pReset:
		w.withProxy(func(p *blackpipe.Proxy) {
			for range e.n {
				p.ResetNextReply(e.cmd)
			}
		})
	case pDropBytes:
		w.withProxy(func(p *blackpipe.Proxy) { p.DropAfterBytes(e.n) })
	case pStall:
		w.withProxy(func(p *blackpipe.Proxy) { p.Stall(e.cmd, e.dur) })
	case pDropRequest:
		w.withProxy(func(p *blackpipe.Proxy) {
			for range e.n {
				p.DropRequest(e.cmd)
			}
		})
	case pCut:
		w.stopProxy()
		pause(e.dur)
		return w.startProxy()
	case sKill, sStop:
		sig := syscall.SIGKILL
		if e.kind == sStop {
			sig = syscall.SIGTERM
		}
		w.stopStore(sig)
		pause(e.dur)
		return w.startStore(ctx)
	case vKill, vStop:
		sig := syscall.SIGKILL
		if e.kind == vStop {
			sig = syscall.SIGTERM
		}
		s := w.serves[e.serve]
		w.stopServe(s, sig)
		pause(e.dur)
		return w.startServe(ctx, s)
	}
	return nil
}

// heal switches every fail point off and disarms the black pipe's pending faults (a reset or
// drop armed for a command that never came would otherwise hit the next round).
func (w *world) heal(ctx context.Context) error {
	w.withProxy(func(p *blackpipe.Proxy) { p.DropAfterBytes(-1) })
	return w.failPointsOff(ctx)
}
