// Package bulk is the unordered bulk writer of leaf counts and the classification of its errors:
// it re-issues only the failed indices of a BulkWriteException.
package bulk
