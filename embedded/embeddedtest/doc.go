// Package embeddedtest starts the store that integration tests talk to: the embedded server
// in memory, over TCP, through the official driver — or, when MONGODB_URI is set, a real
// MongoDB replica set, so the same tests run unchanged against both.
package embeddedtest
