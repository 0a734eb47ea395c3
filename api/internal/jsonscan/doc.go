// Package jsonscan reads the plain subset of JSON that the API's fast paths accept: whitespace,
// punctuation, strings of printable ASCII without escapes, and integers without fraction or
// exponent. Every method returns false at anything else, and the caller then falls back to
// encoding/json, which reads every input this package accepts identically (the callers' fuzz
// tests check that). It does not decode whole documents.
package jsonscan
