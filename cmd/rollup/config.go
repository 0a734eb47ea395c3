package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Settings come from four places, with one precedence rule for every command that uses
// applyConfig: a flag on the command line > its environment variable ROLLUP_<FLAG_NAME>
// (--mongodb-uri → ROLLUP_MONGODB_URI) > its key in the --config YAML file (keys are flag
// names) > the flag's default.

// envPrefix starts the environment variable of every setting.
const envPrefix = "ROLLUP_"

// configFlag is the flag (and, as ROLLUP_CONFIG, the environment variable) naming the file.
const configFlag = "config"

// configUsage explains the sources of settings in a command's --help.
const configUsage = `Every flag can also be set by its environment variable ROLLUP_<FLAG> (--mongodb-uri:
ROLLUP_MONGODB_URI) or by a key of the YAML file --config FILE (or ROLLUP_CONFIG) named like
the flag (mongodb-uri: ...). Precedence: flag > environment > file > default.
`

// envName returns the environment variable of a flag: ROLLUP_ and the name in upper snake case.
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Sources of a setting, as errors and logs name them.
const (
	sourceDefault = "default"
	sourceFlag    = "flag"
)

// settingError is a setting whose value is wrong: it names the setting (as its flag) and
// where the value came from, never the value itself (it may be a secret).
type settingError struct {
	setting string // flag name
	source  string // sourceFlag, "environment variable ROLLUP_X", "config file F line N", sourceDefault
	err     error
}

func (e *settingError) Error() string {
	return fmt.Sprintf("--%s (from %s): %v", e.setting, e.source, e.err)
}

func (e *settingError) Unwrap() error { return e.err }

// settings records where each flag of a FlagSet got its value, once applyConfig ran.
type settings struct {
	sources map[string]string
}

// source says where the flag's value came from.
func (s *settings) source(name string) string {
	if src, ok := s.sources[name]; ok {
		return src
	}
	return sourceDefault
}

// errorf returns a settingError for the flag with its source.
func (s *settings) errorf(name, format string, args ...any) error {
	return &settingError{setting: name, source: s.source(name), err: fmt.Errorf(format, args...)}
}

// registerConfig adds --config to fs.
func registerConfig(fs *flag.FlagSet) *string {
	return fs.String(configFlag, "", "YAML file of settings, keys named like the flags (env ROLLUP_CONFIG)")
}

// newConfigFlagSet is newFlagSet for a command whose settings may also come from the
// environment and a config file (serve, simulate): it adds --config, and --help ends with
// configUsage. Parse it with parseConfigFlags.
func newConfigFlagSet(e *env, name, usage string) *flag.FlagSet {
	fs := newFlagSet(e, name, usage)
	help := fs.Usage
	fs.Usage = func() {
		help()
		_, _ = fmt.Fprint(e.stderr, "\n"+configUsage)
	}
	registerConfig(fs)
	return fs
}

// parseConfigFlags parses args, which must be flags only, then gives the flags they did not
// set their values with applyConfig.
func parseConfigFlags(fs *flag.FlagSet, args []string, lookupEnv func(string) (string, bool)) (*settings, error) {
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return applyConfig(fs, lookupEnv)
}

// applyConfig gives every flag of fs the command line did not set its value from the
// environment (lookupEnv), else from the config file, else leaves its default. The file is
// the --config flag's value, else ROLLUP_CONFIG's; none is read when both are empty. Call it
// after the last fs.Parse. Unknown file keys and values a flag does not accept are errors
// that name the setting and its source.
func applyConfig(fs *flag.FlagSet, lookupEnv func(string) (string, bool)) (*settings, error) {
	s := &settings{sources: make(map[string]string)}
	fs.Visit(func(f *flag.Flag) { s.sources[f.Name] = sourceFlag })
	var path string
	if f := fs.Lookup(configFlag); f != nil {
		if _, set := s.sources[configFlag]; !set {
			if v, ok := lookupEnv(envName(configFlag)); ok && v != "" {
				if err := fs.Set(configFlag, v); err != nil {
					return s, &settingError{setting: configFlag, source: "environment variable " + envName(configFlag), err: err}
				}
				s.sources[configFlag] = "environment variable " + envName(configFlag)
			}
		}
		path = f.Value.String()
	}
	var file []fileSetting
	if path != "" {
		var err error
		if file, err = readConfigFile(path); err != nil {
			return s, err
		}
	}
	inFile := make(map[string]fileSetting, len(file))
	for _, fv := range file {
		switch f := fs.Lookup(fv.key); {
		case fv.key == configFlag:
			return s, fmt.Errorf("config file %s line %d: %q cannot be set in the config file", path, fv.line, fv.key)
		case f == nil:
			return s, fmt.Errorf("config file %s line %d: unknown setting %q (the settings of 'rollup %s' are its flags)", path, fv.line, fv.key, fs.Name())
		}
		inFile[fv.key] = fv
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if _, set := s.sources[f.Name]; set || err != nil || f.Name == configFlag {
			return
		}
		if v, ok := lookupEnv(envName(f.Name)); ok {
			src := "environment variable " + envName(f.Name)
			if e := fs.Set(f.Name, v); e != nil {
				err = &settingError{setting: f.Name, source: src, err: e}
			}
			s.sources[f.Name] = src
			return
		}
		if fv, ok := inFile[f.Name]; ok {
			src := fmt.Sprintf("config file %s line %d", path, fv.line)
			if e := fs.Set(f.Name, fv.value); e != nil {
				err = &settingError{setting: f.Name, source: src, err: e}
			}
			s.sources[f.Name] = src
		}
	})
	return s, err
}

// fileSetting is one key of a config file.
type fileSetting struct {
	key, value string
	line       int
}

// readConfigFile reads a YAML mapping of setting names to single values, in file order.
func readConfigFile(path string) ([]fileSetting, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config file: %w", err)
	}
	out, err := parseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %w", path, err)
	}
	return out, nil
}

// parseConfig parses the text of a config file: a YAML mapping (or nothing) whose values are
// scalars; duplicate keys are errors.
func parseConfig(data []byte) ([]fileSetting, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse YAML: %w", err)
	}
	if doc.Kind == 0 || doc.Kind == yaml.DocumentNode && len(doc.Content) == 0 {
		return nil, nil // comments only
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, errors.New("want a mapping of settings")
	}
	m := doc.Content[0]
	if m.Kind == yaml.ScalarNode && m.ShortTag() == "!!null" {
		return nil, nil
	}
	if m.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: want a mapping of settings (name: value)", m.Line)
	}
	seen := make(map[string]int, len(m.Content)/2)
	out := make([]fileSetting, 0, len(m.Content)/2)
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Value == "" {
			return nil, fmt.Errorf("line %d: a setting name must be a non-empty string", k.Line)
		}
		if first, dup := seen[k.Value]; dup {
			return nil, fmt.Errorf("line %d: %q is already set on line %d", k.Line, k.Value, first)
		}
		seen[k.Value] = k.Line
		switch {
		case v.Kind == yaml.AliasNode && v.Alias != nil && v.Alias.Kind == yaml.ScalarNode:
			v = v.Alias
		case v.Kind != yaml.ScalarNode:
			return nil, fmt.Errorf("line %d: %q needs a single value, not a list or a mapping", k.Line, k.Value)
		}
		if v.ShortTag() == "!!null" {
			return nil, fmt.Errorf("line %d: %q has no value (write \"\" for an empty one)", k.Line, k.Value)
		}
		out = append(out, fileSetting{key: k.Value, value: v.Value, line: k.Line})
	}
	return out, nil
}

// redactURI returns what a log may show of a MongoDB connection string: its scheme and
// hosts, without the user, password, database and options (options may carry secrets too).
// A string it cannot take apart safely is shown as "(unparsable)", never in part.
func redactURI(uri string) string {
	if uri == "" {
		return ""
	}
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok || (scheme != "mongodb" && scheme != "mongodb+srv") {
		return "(unparsable)"
	}
	q := len(rest)
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		q = i
	}
	if at := strings.LastIndexByte(rest[:q], '@'); at >= 0 {
		rest = rest[at+1:]
	} else if strings.Contains(rest, "@") {
		return scheme + "://(unparsable)" // an '@' only after a '?': user info may hide in front
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	for _, h := range strings.Split(rest, ",") {
		if !validHostPort(h) {
			return scheme + "://(unparsable)"
		}
	}
	return scheme + "://" + rest
}

// validHostPort reports whether s looks like host[:port] (a name, an IPv4 or a bracketed IPv6
// address), so redactURI never shows a fragment of user info as a host.
func validHostPort(s string) bool {
	host, port := s, ""
	bracketed := strings.HasPrefix(s, "[")
	if bracketed {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return false
		}
		host, port = s[1:end], strings.TrimPrefix(s[end+1:], ":")
		if s[end+1:] != "" && !strings.HasPrefix(s[end+1:], ":") {
			return false
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host, port = s[:i], s[i+1:]
		if port == "" {
			return false
		}
	}
	if host == "" || len(port) > 5 {
		return false
	}
	for _, c := range port {
		if c < '0' || c > '9' {
			return false
		}
	}
	for _, c := range host {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' ||
			bracketed && (c == ':' || c == '%')
		if !ok {
			return false
		}
	}
	return true
}

// checkMongoURI checks the shape of a connection string ("" is allowed: no deployment)
// without echoing it, since it may hold a password; the driver checks the options.
func checkMongoURI(uri string) error {
	if uri == "" {
		return nil
	}
	if !strings.HasPrefix(uri, "mongodb://") && !strings.HasPrefix(uri, "mongodb+srv://") {
		return errors.New(`want a connection string starting with "mongodb://" or "mongodb+srv://"`)
	}
	_, rest, _ := strings.Cut(uri, "://")
	userInfo, _, hasUser := strings.Cut(rest, "@")
	if strings.HasSuffix(redactURI(uri), "(unparsable)") || (hasUser && strings.ContainsAny(userInfo, "/?")) {
		return errors.New("want mongodb://[user:password@]host[:port][,host[:port]...][/[database]][?options] " +
			"(escape '@', ':', '/' and '?' in the user and password as %40, %3A, %2F, %3F)")
	}
	return nil
}

// checkDatabaseName applies MongoDB's rules for database names.
func checkDatabaseName(name string) error {
	switch {
	case name == "":
		return errors.New("must not be empty")
	case len(name) >= 64:
		return fmt.Errorf("must be shorter than 64 bytes, got %d", len(name))
	case strings.ContainsAny(name, "/\\. \"$*<>:|?\x00"):
		return fmt.Errorf("%q has a character MongoDB does not allow in database names (/\\. \"$*<>:|? or NUL)", name)
	}
	return nil
}

// checkListenAddr checks a host:port to listen on (an empty host is every interface).
func checkListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port such as 127.0.0.1:8080 or :8080: %w", err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 0 to 65535", port)
	}
	return nil
}
