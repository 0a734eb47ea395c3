// Package blackpipe is a fault-injecting TCP proxy for tests (the "black pipe" technique): it
// sits between a MongoDB client and a server (the embedded server or a real mongod), frames the
// traffic with package wire, counts and records the commands that pass, and on request breaks
// the next matching exchange: resets the client connection mid-reply, drops it after a number
// of bytes, stalls a reply, or swallows a request.
//
// It owns only the proxying and the fault bookkeeping. It does not interpret replies beyond
// their framing, does not rewrite messages (forwarding is byte-exact), and does not speak TLS
// or compression. It is meant for tests, not for production traffic.
package blackpipe
