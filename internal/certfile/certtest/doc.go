// Package certtest generates the certificates of tests: a throwaway ECDSA certificate
// authority that issues server certificates for 127.0.0.1 and localhost, written as PEM files
// in a test's temporary directory. It is for tests only.
package certtest
