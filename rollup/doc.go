// Package rollup holds the pure functions that turn the children's counts at a tick into a
// parent's document. There is no MongoDB inside.
package rollup
