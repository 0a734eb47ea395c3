// Package cpulist reads and writes Linux CPU lists ("0-3,6"), as taskset -c takes them and
// /sys/devices/system/cpu/online holds them, and reads the machine's online CPUs. The
// embedded server's hostInfo counts them (numCores); rollup-bench's --cpus checks its sets
// against them. It lives in the embedded module because both need it and that module imports
// nothing of rollup's.
package cpulist
