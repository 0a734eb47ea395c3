package storage

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkWriteDuringScan measures single-insert Write latency while another goroutine
// scans a 500,000-document collection over and over (decoding every document, as find does),
// with the scans holding the read lock throughout (Read, as before issue #17) or releasing it
// (ReadYielding). It reports the latency percentiles; run Read with a small -benchtime=Nx:
// each of its writes waits for a whole scan.
func BenchmarkWriteDuringScan(b *testing.B) {
	const n = 500_000
	e, err := Open(Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = e.Close() }()
	ctx := context.Background()
	if _, err := e.Write(ctx, func(w *Writer) error {
		_, err := w.CreateIndex("db", "c", IndexSpec{Name: "k_1", Key: d("k", 1)})
		return err
	}); err != nil {
		b.Fatal(err)
	}
	for lo := 0; lo < n; lo += 10_000 {
		if _, err := e.Write(ctx, func(w *Writer) error {
			for i := lo; i < lo+10_000; i++ {
				if _, err := w.Insert("db", "c", d("_id", i, "k", fmt.Sprintf("%07d", i), "players", i%977)); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	next := n // the next _id to insert, across runs
	for _, mode := range []string{"Read", "ReadYielding"} {
		b.Run(mode, func(b *testing.B) {
			read := e.Read
			if mode == "ReadYielding" {
				read = e.ReadYielding
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var scans, scanned int
			var scanTime time.Duration
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					begin := time.Now()
					read(func(r *Reader) {
						r.Find("db", "c", d("k", d("$gte", "")), func(doc *Doc) bool {
							_ = doc.D()
							scanned++
							return true
						})
					})
					scanTime += time.Since(begin)
					scans++
				}
			}()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				next++
				begin := time.Now()
				if _, err := e.Write(ctx, func(w *Writer) error {
					_, err := w.Insert("db", "c", d("_id", next, "k", fmt.Sprintf("%07d", next), "players", 1))
					return err
				}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(begin))
			}
			b.StopTimer()
			close(stop)
			wg.Wait()
			slices.Sort(lat)
			pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
			b.ReportMetric(pct(0.5), "p50-µs")
			b.ReportMetric(pct(0.99), "p99-µs")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
			if scans > 0 {
				b.ReportMetric(float64(scanTime.Milliseconds())/float64(scans), "ms/scan")
			}
		})
	}
}
