// Package web owns the dashboard's static assets (web/assets: index.html, app.js, app.css and
// the vendored uPlot chart library) and their embedding in the binary: Handler serves the page
// at / and the files at /assets/ from an embed.FS, so nothing is fetched from a CDN at run time.
//
// The page is plain HTML, CSS and JavaScript with no build step. It reads everything it shows
// from the read API (GET /v1/projects, /v1/projects/{p}/tree, /series and /ticks; see
// docs/openapi.yaml). The URL fragment carries the view (project, node, tick, time range,
// step, aggregation, time zone, comparison, refresh: see the README), so a link shares it,
// and may carry the bearer token, which the page moves to the tab's sessionStorage, sends only
// in the API's Authorization header and puts in a shared link only when asked. A view is shown
// only once all of its data is loaded; a failed refresh keeps the last view, says it is stale
// and since when, and retries with backoff.
//
// The package does not serve or implement the API (package api does), authenticate anything
// (the page is public; its data is not), or decide the routes of the process (cmd/rollup mounts
// Handler next to the API). browser_test.go drives the page in headless Chromium over the
// DevTools protocol (cdp_test.go).
package web
