//go:build linux

package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// browser is headless Chromium driven over the DevTools protocol on a pipe
// (--remote-debugging-pipe: the browser reads NUL-terminated JSON messages on fd 3 and writes
// its own on fd 4), so the tests need no WebSocket client and no port.
type browser struct {
	t   *testing.T
	cmd *exec.Cmd
	out io.WriteCloser // the browser's fd 3

	mu      sync.Mutex
	nextID  int
	pending map[int]chan cdpMessage
	events  []cdpMessage // every event, in order of arrival
	closed  error        // set when the reader ends
	wake    chan struct{}

	// context is the browser context of every page of the test (newPage). One context, not
	// one per page: a context of its own cost each page new renderer processes (with the
	// desktop chromium the test then used, 86-113 machine CPU s against 60-90 s with one
	// context; docs/testing.md).
	// The dashboard keeps its token in sessionStorage, which is per tab, so every page still
	// opens without one; cookies and the HTTP cache are shared by the test's pages.
	context string
}

type cdpMessage struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// startBrowser starts Chromium; it is killed (with its whole process group) when the test
// ends.
func startBrowser(ctx context.Context, t *testing.T) *browser {
	t.Helper()
	toBrowserR, toBrowserW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	fromBrowserR, fromBrowserW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
		"--disable-background-timer-throttling", "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows",
		"--disable-dev-shm-usage", "--hide-scrollbars", "--force-color-profile=srgb", "--lang=en-US",
		"--user-data-dir=" + t.TempDir(), "--remote-debugging-pipe", "about:blank"}
	cmd := exec.Command(chromiumPath, args...)
	cmd.ExtraFiles = []*os.File{toBrowserR, fromBrowserW} // fds 3 and 4
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", chromiumPath, err)
	}
	_ = toBrowserR.Close()
	_ = fromBrowserW.Close()
	b := &browser{t: t, cmd: cmd, out: toBrowserW, pending: map[int]chan cdpMessage{}, wake: make(chan struct{})}
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		b.read(fromBrowserR)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		_ = toBrowserW.Close()
		_ = fromBrowserR.Close()
		<-readerDone
		if t.Failed() {
			t.Logf("chromium stderr:\n%s", tail(stderr.String(), 3000))
		}
	})
	var v struct {
		Product string `json:"product"`
	}
	b.call(ctx, "", "Browser.getVersion", nil, &v)
	t.Logf("browser: %s", v.Product)
	var bc struct {
		BrowserContextID string `json:"browserContextId"`
	}
	b.call(ctx, "", "Target.createBrowserContext", map[string]any{"disposeOnDetach": true}, &bc)
	b.context = bc.BrowserContextID
	return b
}

func (b *browser) read(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	var err error
	for {
		var raw []byte
		raw, err = br.ReadBytes(0)
		if err != nil {
			break
		}
		var m cdpMessage
		if err = json.Unmarshal(raw[:len(raw)-1], &m); err != nil {
			break
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.pending[m.ID]; ok {
				delete(b.pending, m.ID)
				ch <- m
			}
		} else {
			b.events = append(b.events, m)
			close(b.wake)
			b.wake = make(chan struct{})
		}
		b.mu.Unlock()
	}
	b.mu.Lock()
	b.closed = fmt.Errorf("devtools pipe: %w", err)
	for id, ch := range b.pending {
		delete(b.pending, id)
		close(ch)
	}
	close(b.wake)
	b.wake = make(chan struct{})
	b.mu.Unlock()
}

// call sends method with params in session ("" for the browser) and decodes its result into
// out (when not nil); an error answer fails the test.
func (b *browser) call(ctx context.Context, session, method string, params, out any) {
	b.t.Helper()
	if err := b.try(ctx, session, method, params, out); err != nil {
		b.t.Fatalf("%s: %v", method, err)
	}
}

func (b *browser) try(ctx context.Context, session, method string, params, out any) error {
	ch := make(chan cdpMessage, 1)
	b.mu.Lock()
	if b.closed != nil {
		b.mu.Unlock()
		return b.closed
	}
	b.nextID++
	id := b.nextID
	b.pending[id] = ch
	b.mu.Unlock()
	p, err := json.Marshal(params)
	if err != nil {
		return err
	}
	if params == nil {
		p = []byte("{}")
	}
	msg, err := json.Marshal(cdpMessage{ID: id, Method: method, Params: p, SessionID: session})
	if err != nil {
		return err
	}
	if _, err := b.out.Write(append(msg, 0)); err != nil {
		return fmt.Errorf("write to the browser: %w", err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return errors.New("the browser went away")
		}
		if m.Error != nil {
			return fmt.Errorf("%d %s", m.Error.Code, m.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("no answer: %w", ctx.Err())
	}
}

// waitEvent waits for an event method (of session, "" for any) for which match (may be nil)
// is true, among those after the first skip events.
func (b *browser) waitEvent(ctx context.Context, skip int, method, session string, match func(json.RawMessage) bool) json.RawMessage {
	b.t.Helper()
	for {
		b.mu.Lock()
		for _, e := range b.events[min(skip, len(b.events)):] {
			if e.Method == method && (session == "" || e.SessionID == session) && (match == nil || match(e.Params)) {
				b.mu.Unlock()
				return e.Params
			}
		}
		wake, closed := b.wake, b.closed
		b.mu.Unlock()
		if closed != nil {
			b.t.Fatalf("waiting for %s: %v", method, closed)
		}
		select {
		case <-wake:
		case <-ctx.Done():
			b.t.Fatalf("no %s event: %v", method, ctx.Err())
		}
	}
}

func (b *browser) numEvents() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.events)
}

// page is a tab of the test's browser context (browser.context).
type page struct {
	b       *browser
	t       *testing.T
	ctx     context.Context
	session string
}

// newPage opens a blank tab of width × height CSS pixels in the test's browser context; it
// is closed when t ends.
func (b *browser) newPage(ctx context.Context, t *testing.T, width, height int) *page {
	t.Helper()
	var tg struct {
		TargetID string `json:"targetId"`
	}
	b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank", "browserContextId": b.context}, &tg)
	var at struct {
		SessionID string `json:"sessionId"`
	}
	b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": tg.TargetID, "flatten": true}, &at)
	p := &page{b: b, t: t, ctx: ctx, session: at.SessionID}
	p.call("Page.enable", nil, nil)
	p.call("Runtime.enable", nil, nil)
	p.call("Emulation.setFocusEmulationEnabled", map[string]any{"enabled": true}, nil)
	p.resize(width, height, false)
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = b.try(cctx, "", "Target.closeTarget", map[string]any{"targetId": tg.TargetID}, nil)
	})
	return p
}

func (p *page) call(method string, params, out any) {
	p.t.Helper()
	if err := p.b.try(p.ctx, p.session, method, params, out); err != nil {
		p.t.Fatalf("%s: %v", method, err)
	}
}

// resize sets the viewport (mobile: a phone's touch screen and meta viewport handling).
func (p *page) resize(width, height int, mobile bool) {
	p.t.Helper()
	p.call("Emulation.setDeviceMetricsOverride", map[string]any{
		"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile,
	}, nil)
}

// open loads url and waits for the page's load event.
func (p *page) open(url string) {
	p.t.Helper()
	skip := p.b.numEvents()
	p.call("Page.navigate", map[string]any{"url": url}, nil)
	p.b.waitEvent(p.ctx, skip, "Page.loadEventFired", p.session, nil)
}

// eval evaluates the JavaScript expression expr (awaiting a promise) and decodes its value
// into out (when not nil).
func (p *page) eval(expr string, out any) {
	p.t.Helper()
	if err := p.tryEval(expr, out); err != nil {
		p.t.Fatalf("eval %s: %v", expr, err)
	}
}

func (p *page) tryEval(expr string, out any) error {
	var res struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := p.b.try(p.ctx, p.session, "Runtime.evaluate", map[string]any{
		"expression": expr, "awaitPromise": true, "returnByValue": true, "userGesture": true,
	}, &res); err != nil {
		return err
	}
	if res.ExceptionDetails != nil {
		return fmt.Errorf("%s %s", res.ExceptionDetails.Text, res.ExceptionDetails.Exception.Description)
	}
	if out != nil && len(res.Result.Value) > 0 {
		return json.Unmarshal(res.Result.Value, out)
	}
	return nil
}

// str evaluates expr to a string.
func (p *page) str(expr string) string {
	p.t.Helper()
	var s string
	p.eval("String("+expr+")", &s)
	return s
}

// waitLimit bounds one wait of the page (generous: a view loads in well under a second).
const waitLimit = 45 * time.Second

// waitFor polls the JavaScript condition cond until it is true; after waitLimit (or at the
// test's deadline) it fails the test with what, the page's status and error lines.
func (p *page) waitFor(what, cond string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, waitLimit)
	defer cancel()
	for {
		var ok bool
		if err := p.tryEval("Boolean("+cond+")", &ok); err == nil && ok {
			return
		}
		select {
		case <-ctx.Done():
			p.t.Fatalf("waiting for %s (%s): %v\nstatus: %q\nerror: %q\nstale: %q", what, cond, ctx.Err(),
				p.str(`document.getElementById('status').textContent`), p.str(`document.getElementById('error-text').textContent`),
				p.str(`document.getElementById('stale-text').textContent`))
		case <-time.After(40 * time.Millisecond):
		}
	}
}

// loads is how many views the page has shown (body data-loads).
func (p *page) loads() int {
	p.t.Helper()
	var n int
	p.eval(`Number(document.body.dataset.loads || 0)`, &n)
	return n
}

// waitLoads waits until the page has shown more than n views and no load is in flight.
func (p *page) waitLoads(what string, n int) {
	p.t.Helper()
	p.waitFor(what, fmt.Sprintf(`Number(document.body.dataset.loads || 0) > %d && !document.body.dataset.busy`, n))
}

func (p *page) dom() string {
	p.t.Helper()
	return p.str(`document.documentElement.outerHTML`)
}

// click clicks the element of the CSS selector sel with the mouse, at its centre, after
// scrolling it into view.
func (p *page) click(sel string) {
	p.t.Helper()
	x, y := p.centre(sel)
	p.mouse("mouseMoved", x, y, 0)
	p.mouse("mousePressed", x, y, 1)
	p.mouse("mouseReleased", x, y, 1)
}

// centre scrolls the element of sel into view and returns its centre in viewport pixels.
func (p *page) centre(sel string) (x, y float64) {
	p.t.Helper()
	var r struct{ X, Y float64 }
	p.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.scrollIntoView({block: 'center', inline: 'center'});
		const r = e.getBoundingClientRect(); return {X: r.left + r.width / 2, Y: r.top + r.height / 2}; })()`, sel), &r)
	return r.X, r.Y
}

// mouse dispatches a mouse event (typ mousePressed, mouseMoved or mouseReleased) at x, y.
func (p *page) mouse(typ string, x, y float64, clicks int) {
	p.t.Helper()
	ev := map[string]any{"type": typ, "x": x, "y": y, "button": "none", "buttons": 0}
	if typ != "mouseMoved" || clicks > 0 {
		ev["button"], ev["buttons"], ev["clickCount"] = "left", 1, clicks
	}
	if typ == "mouseReleased" {
		ev["buttons"] = 0
	}
	p.call("Input.dispatchMouseEvent", ev, nil)
}

// screenshot saves the whole page (not only the viewport) as a PNG in path.
func (p *page) screenshot(path string) {
	p.t.Helper()
	var m struct {
		CSSContentSize struct{ Width, Height float64 } `json:"cssContentSize"`
	}
	p.call("Page.getLayoutMetrics", nil, &m)
	var shot struct {
		Data string `json:"data"`
	}
	p.call("Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": m.CSSContentSize.Width, "height": m.CSSContentSize.Height, "scale": 1}}, &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s (%.0f×%.0f)", path, m.CSSContentSize.Width, m.CSSContentSize.Height)
}

// allowDownloads saves the downloads of the test's browser context in dir, each named by its
// guid: the page's, and those of the test's later pages until another call.
func (p *page) allowDownloads(dir string) {
	p.t.Helper()
	p.b.call(p.ctx, "", "Browser.setDownloadBehavior", map[string]any{"behavior": "allowAndName", "downloadPath": dir,
		"browserContextId": p.b.context, "eventsEnabled": true}, nil)
}

// waitDownload waits for the first download that begins after event skip (numEvents before
// the click) to complete and returns its suggested name and content.
func (p *page) waitDownload(skip int, dir string) (string, []byte) {
	p.t.Helper()
	var begin struct {
		GUID              string `json:"guid"`
		SuggestedFilename string `json:"suggestedFilename"`
	}
	if err := json.Unmarshal(p.b.waitEvent(p.ctx, skip, "Browser.downloadWillBegin", "", nil), &begin); err != nil {
		p.t.Fatal(err)
	}
	p.b.waitEvent(p.ctx, skip, "Browser.downloadProgress", "", func(r json.RawMessage) bool {
		var e struct{ GUID, State string }
		_ = json.Unmarshal(r, &e)
		if e.GUID == begin.GUID && e.State == "canceled" {
			p.t.Fatalf("download %s canceled", begin.SuggestedFilename)
		}
		return e.GUID == begin.GUID && e.State == "completed"
	})
	data, err := os.ReadFile(filepath.Join(dir, begin.GUID))
	if err != nil {
		p.t.Fatal(err)
	}
	return begin.SuggestedFilename, data
}

// consoleErrors returns the page's uncaught exceptions and console errors so far.
func (p *page) consoleErrors() []string {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	var out []string
	for _, e := range p.b.events {
		if e.SessionID != p.session {
			continue
		}
		switch e.Method {
		case "Runtime.exceptionThrown":
			out = append(out, string(e.Params))
		case "Runtime.consoleAPICalled":
			if strings.Contains(string(e.Params), `"type":"error"`) {
				out = append(out, string(e.Params))
			}
		}
	}
	return out
}

// key presses and releases the key (a DOM key name: "ArrowLeft", "Enter", "Tab") in the
// focused element.
func (p *page) key(key string) {
	p.t.Helper()
	codes := map[string]int{"ArrowLeft": 37, "ArrowRight": 39, "Enter": 13, "Tab": 9, "Home": 36, "End": 35}
	for _, typ := range []string{"rawKeyDown", "keyUp"} {
		ev := map[string]any{"type": typ, "key": key, "code": key, "windowsVirtualKeyCode": codes[key], "nativeVirtualKeyCode": codes[key]}
		if key == "Enter" && typ == "rawKeyDown" {
			p.call("Input.dispatchKeyEvent", ev, nil)
			ev = map[string]any{"type": "char", "key": key, "text": "\r"}
		}
		p.call("Input.dispatchKeyEvent", ev, nil)
	}
}

// touch dispatches a touch event (typ touchStart, touchMove, touchEnd) with a finger at each
// of pts (none for touchEnd).
func (p *page) touch(typ string, pts ...[2]float64) {
	p.t.Helper()
	points := make([]map[string]any, 0, len(pts))
	for i, pt := range pts {
		points = append(points, map[string]any{"x": pt[0], "y": pt[1], "id": i})
	}
	p.call("Input.dispatchTouchEvent", map[string]any{"type": typ, "touchPoints": points}, nil)
}
