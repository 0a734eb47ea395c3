// Package mongoerr defines the server errors of the embedded MongoDB-compatible server: a code,
// its MongoDB code name and a message, exactly as a real mongod reports them in a command reply
// ({ok: 0, errmsg, code, codeName}). It owns no behaviour beyond building and recognising them.
package mongoerr
