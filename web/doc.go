// Package web owns the dashboard's static assets (web/assets: index.html, app.js, app.css and
// the vendored uPlot chart library) embedded in the binary: Handler serves the page at / and
// the files at /assets/, so nothing is fetched from a CDN at run time.
//
// The one idea: the page is plain HTML, CSS and JavaScript with no build step, and everything
// it shows comes from the read API with the bearer token the user gives it (the URL fragment
// carries the view; see docs/design/api.md).
//
// It does not implement the API (package api does), authenticate anything (the page is
// public; its data is not) or choose the routes of the process (internal/app mounts Handler).
// browser_test.go drives the page in headless Chromium over the DevTools protocol.
package web
