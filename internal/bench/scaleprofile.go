package bench

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

// Sampling of the contention profiles of the scale benchmark: every mutex contention event
// (the fraction 1 costs little next to the contention itself), and a blocking event per
// blockProfileRateNs nanoseconds spent blocked on average (channel waits, selects, sync.Cond,
// mutexes), so short waits are sampled without slowing every channel operation.
const (
	mutexProfileFraction = 1
	blockProfileRateNs   = 10_000
)

// startProfiles starts, at a measured tick, the CPU profile of --cpuprofile (once) and the
// contention profiles.
func (r *scaleRun) startProfiles() error {
	if r.cfg.CPUProfile != "" && r.profiling == nil {
		f, err := os.Create(r.cfg.CPUProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
			return fmt.Errorf("cpu profile: %w", err)
		}
		r.profiling = f
	}
	r.startContentionProfiles()
	return nil
}

// stopCPUProfile ends the CPU profile, if one runs, and closes its file.
func (r *scaleRun) stopCPUProfile() error {
	if r.profiling == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := r.profiling.Close()
	r.profiling = nil
	if err != nil {
		return fmt.Errorf("cpu profile: %w", err)
	}
	return nil
}

// startContentionProfiles starts sampling mutex contention and blocking for --mutexprofile
// and --blockprofile, once (at the first measured tick: the warm-up's tree loads are left
// out).
func (r *scaleRun) startContentionProfiles() {
	if r.contention {
		return
	}
	if r.cfg.MutexProfile != "" {
		runtime.SetMutexProfileFraction(mutexProfileFraction)
		r.contention = true
	}
	if r.cfg.BlockProfile != "" {
		runtime.SetBlockProfileRate(blockProfileRateNs)
		r.contention = true
	}
}

// writeContentionProfiles writes the mutex and block profiles (when asked for) and stops
// their sampling.
func (r *scaleRun) writeContentionProfiles() error {
	if r.cfg.MutexProfile != "" {
		runtime.SetMutexProfileFraction(0)
		if err := writeProfile("mutex", r.cfg.MutexProfile); err != nil {
			return err
		}
	}
	if r.cfg.BlockProfile != "" {
		runtime.SetBlockProfileRate(0)
		if err := writeProfile("block", r.cfg.BlockProfile); err != nil {
			return err
		}
	}
	r.contention = false
	return nil
}

// writeProfile writes the named runtime profile (pprof.Lookup) to path.
func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s profile: %w", name, err)
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("%s profile: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s profile: %w", name, err)
	}
	return nil
}
