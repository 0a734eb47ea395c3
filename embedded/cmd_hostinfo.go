package embedded

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/cpulist"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// cmdHostInfo answers hostInfo (admin only, as in mongod) with the fields the server really
// knows: the time, the host name, the address size, the architecture, the machine's online
// cores (numCores, from /sys where Linux has it) and the cores this process may run on
// (numCoresAvailableToProcess: its CPU affinity, as mongod reads it with sched_getaffinity,
// and no more than GOMAXPROCS, which for this server written in Go is how many cores it can
// use at once and follows a container's CPU limit). rollup's serve sizes its writes in flight
// by the latter (store.Cores). Fields the server does not compute (memory, NUMA, libc, CPU
// features) are left out rather than guessed.
func cmdHostInfo(_ context.Context, _ *Server, r *request) (result, error) {
	if r.db != "admin" {
		return result{}, mongoerr.New(mongoerr.Unauthorized, "hostInfo may only be run against the admin database.")
	}
	host, _ := os.Hostname()
	sys := bson.D{
		{Key: "currentTime", Value: bson.NewDateTimeFromTime(time.Now())},
		{Key: "hostname", Value: host},
		{Key: "cpuAddrSize", Value: int32(strconv.IntSize)},
	}
	if online, err := cpulist.Online(); err == nil {
		sys = append(sys, bson.E{Key: "numCores", Value: int32(len(online))})
	}
	sys = append(sys,
		bson.E{Key: "numCoresAvailableToProcess", Value: int32(min(runtime.NumCPU(), runtime.GOMAXPROCS(0)))},
		bson.E{Key: "cpuArch", Value: cpuArch(runtime.GOARCH)},
	)
	osName := runtime.GOOS
	if osName != "" {
		osName = strings.ToUpper(osName[:1]) + osName[1:]
	}
	return result{fields: bson.D{
		{Key: "system", Value: sys},
		{Key: "os", Value: bson.D{{Key: "type", Value: osName}}},
	}}, nil
}

// cpuArch names GOARCH as mongod's hostInfo does (uname's machine name).
func cpuArch(goarch string) string {
	switch goarch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	case "386":
		return "i686"
	default:
		return goarch
	}
}
