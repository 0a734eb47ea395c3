package cpulist

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// maxCPU bounds the CPU numbers a list may name (Linux's CONFIG_NR_CPUS maximum).
const maxCPU = 8191

// Parse parses a CPU list as taskset -c and /sys/devices/system/cpu/online write it:
// numbers and ranges (a-b, a <= b) separated by commas. It returns the CPUs sorted, each once.
func Parse(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty CPU list")
	}
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := cpuNumber(lo)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = cpuNumber(hi); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("CPU range %q runs backwards", part)
			}
		}
		for n := a; n <= b; n++ {
			cpus = append(cpus, n)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

func cpuNumber(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > maxCPU {
		return 0, fmt.Errorf("%q is not a CPU number (0 to %d)", s, maxCPU)
	}
	return n, nil
}

// Format writes sorted, distinct CPUs as a list with ranges ("0-3,6").
func Format(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// Online returns the machine's online CPUs (/sys/devices/system/cpu/online), whatever
// this process's own affinity.
func Online() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("online CPUs: %w", err)
	}
	cpus, err := Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("online CPUs: %w", err)
	}
	return cpus, nil
}
