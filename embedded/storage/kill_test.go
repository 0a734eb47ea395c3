package storage

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

const killChildEnv = "STORAGE_KILL9_CHILD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir)
		return
	}
	goleak.VerifyTestMain(m)
}

// killChild writes forever from two goroutines, printing "ack <g> <i>" after each
// acknowledged Write, until the parent kills the process.
func killChild(dir string) {
	e, err := Open(Options{Dir: dir, CompactAfterBytes: 32 << 10})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	for g := 0; g < 2; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				_, err := e.Write(context.Background(), func(w *Writer) error {
					for k := 0; k < 3; k++ {
						if _, err := w.Insert("db", "c", d("_id", fmt.Sprintf("%d-%d-%d", g, i, k), "pad", strings.Repeat("x", 200))); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					fmt.Println("write:", err)
					os.Exit(2)
				}
				mu.Lock()
				_, _ = fmt.Fprintf(out, "ack %d %d\n", g, i)
				_ = out.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func TestKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess test")
	}
	for _, killAfter := range []int{40, 400} {
		t.Run(fmt.Sprint(killAfter), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestKill9$")
			cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			acked := map[string]bool{}
			sc := bufio.NewScanner(stdout)
			killed := false
			timer := time.AfterFunc(15*time.Second, func() { _ = cmd.Process.Kill() })
			defer timer.Stop()
			for sc.Scan() {
				var g, i int
				if _, err := fmt.Sscanf(sc.Text(), "ack %d %d", &g, &i); err != nil {
					t.Fatalf("child: %s", sc.Text())
				}
				for k := 0; k < 3; k++ {
					acked[fmt.Sprintf("%d-%d-%d", g, i, k)] = true
				}
				if !killed && len(acked)/3 >= killAfter {
					_ = cmd.Process.Kill() // SIGKILL
					killed = true
				}
			}
			_ = cmd.Wait()
			if !killed {
				t.Fatalf("child exited before %d acks (%d)", killAfter, len(acked)/3)
			}
			e := openDir(t, dir, Options{})
			missing := 0
			e.Read(func(r *Reader) {
				for id := range acked {
					if _, ok := r.Get("db", "c", id); !ok {
						missing++
					}
				}
				t.Logf("%d acknowledged documents, %d present after kill -9", len(acked), r.Count("db", "c"))
			})
			if missing > 0 {
				t.Fatalf("%d acknowledged documents lost", missing)
			}
		})
	}
}
