// Package jsonscan reads the plain subset of JSON the API's fast paths accept: whitespace,
// punctuation, strings of printable ASCII without escapes, and integers without fraction or
// exponent. Every method returns false at anything else.
//
// The one idea: it never decides what a body means — its callers fall back to encoding/json
// for anything it refuses, and their fuzz tests check that both read every input it accepts
// identically. Why it exists (encoding/json's cost per request) is measured in
// docs/benchmarks.md.
//
// It does not decode whole documents or report errors.
package jsonscan
