// Package tree is the service hierarchy (project → group → server → process) and its
// validation. It does no I/O policy: loading and storing trees belongs to its callers.
package tree
