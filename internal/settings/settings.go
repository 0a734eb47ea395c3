package settings

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// EnvPrefix starts the environment variable of every setting.
const EnvPrefix = "ROLLUP_"

// ConfigFlag is the flag (and, as ROLLUP_CONFIG, the environment variable) naming the file.
const ConfigFlag = "config"

// Sources of a setting, as errors and logs name them.
const (
	SourceDefault = "default"
	SourceFlag    = "flag"
)

// sourcesHelp ends every command's --help.
const sourcesHelp = `Every flag marked "env" can also be set by that environment variable, or by a key of the
YAML file --config FILE (or ROLLUP_CONFIG) named like the flag (mongodb-uri: ...).
Precedence: flag > environment > file > default.
`

// EnvName returns the environment variable of a flag: ROLLUP_ and the name in upper snake case.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// LookupEnv reads an environment variable, as os.LookupEnv does.
type LookupEnv func(string) (string, bool)

// Error is a setting whose value is wrong: it names the setting (as its flag) and where the
// value came from, never the value itself (it may be a secret).
type Error struct {
	Setting string // flag name
	Source  string // SourceFlag, "environment variable ROLLUP_X", "config file F line N", SourceDefault; "" until FlagSet.Explain
	Err     error
}

func (e *Error) Error() string {
	if e.Source == "" {
		return fmt.Sprintf("--%s: %v", e.Setting, e.Err)
	}
	return fmt.Sprintf("--%s (from %s): %v", e.Setting, e.Source, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// Invalid returns an *Error for setting without its source; FlagSet.Explain adds the source.
// Packages that validate their own configuration return it, naming the setting as its flag.
func Invalid(setting, format string, args ...any) error {
	return &Error{Setting: setting, Err: fmt.Errorf(format, args...)}
}

// FlagSet is a subcommand's flags. Define them on the embedded flag.FlagSet, then call Parse
// or ParseArgs once.
type FlagSet struct {
	*flag.FlagSet
	out      io.Writer
	usage    string
	sources  map[string]string
	flagOnly map[string]bool
	// ownConfig: --config names the command's own file (OwnConfig), not a file of settings.
	ownConfig bool
}

// New returns the flag set of the subcommand name with --config defined: errors and --help
// go to out, and --help prints usage (the command's text with its examples), then every flag
// with its environment variable, then the sources rule.
func New(name, usage string, out io.Writer) *FlagSet {
	fs := &FlagSet{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), out: out, usage: usage,
		sources: map[string]string{}, flagOnly: map[string]bool{}}
	fs.SetOutput(out)
	fs.String(ConfigFlag, "", "YAML file of settings, keys named like the flags")
	fs.Usage = fs.printUsage
	return fs
}

// FlagOnly marks settings that only the command line sets: no environment variable, no file
// key (for example a benchmark's target store, which an operator's ROLLUP_MONGODB_URI must
// never choose).
func (fs *FlagSet) FlagOnly(names ...string) {
	for _, n := range names {
		fs.flagOnly[n] = true
	}
}

// OwnConfig makes --config (or ROLLUP_CONFIG) name a file the command reads itself, in its
// own format (rollup agent's YAML of sources): the flag set reads no settings from it, and
// the other flags are set by the command line or the environment only. usage replaces the
// flag's help text.
func (fs *FlagSet) OwnConfig(usage string) {
	fs.ownConfig = true
	fs.Lookup(ConfigFlag).Usage = usage
}

// Parse parses args, which must be flags only, then applies the environment and the file.
func (fs *FlagSet) Parse(args []string, lookupEnv LookupEnv) error {
	if err := fs.FlagSet.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return fs.apply(lookupEnv)
}

// ParseArgs parses args, where flags and other arguments may come in any order (everything
// after "--" is an argument), applies the environment and the file, and returns the other
// arguments in order.
func (fs *FlagSet) ParseArgs(args []string, lookupEnv LookupEnv) ([]string, error) {
	var pos []string
	for {
		if err := fs.FlagSet.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return pos, fs.apply(lookupEnv)
}

// ParseTrailing parses flags up to the first other argument, as package flag does,
// applies the environment and the file, and returns the arguments from there on.
func (fs *FlagSet) ParseTrailing(args []string, lookupEnv LookupEnv) ([]string, error) {
	if err := fs.FlagSet.Parse(args); err != nil {
		return nil, err
	}
	return fs.Args(), fs.apply(lookupEnv)
}

// Source says where the flag's value came from; valid after Parse or ParseArgs.
func (fs *FlagSet) Source(name string) string {
	if src, ok := fs.sources[name]; ok {
		return src
	}
	return SourceDefault
}

// Errorf returns an *Error for the flag with its source.
func (fs *FlagSet) Errorf(name, format string, args ...any) error {
	return &Error{Setting: name, Source: fs.Source(name), Err: fmt.Errorf(format, args...)}
}

// Explain returns the *Error in err's chain (see Invalid) with its setting's source; errors
// without one, and nil, are returned as they are.
func (fs *FlagSet) Explain(err error) error {
	var se *Error
	if !errors.As(err, &se) {
		return err
	}
	src := se.Source
	if src == "" {
		src = fs.Source(se.Setting)
	}
	return &Error{Setting: se.Setting, Source: src, Err: se.Err}
}

// apply gives every flag the command line did not set its value from the environment, else
// from the config file, else leaves its default. The file is the --config flag's value, else
// ROLLUP_CONFIG's; none is read when both are empty. Unknown file keys and values a flag does
// not accept are errors that name the setting and its source.
func (fs *FlagSet) apply(lookupEnv LookupEnv) error {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	fs.Visit(func(f *flag.Flag) { fs.sources[f.Name] = SourceFlag })
	if _, set := fs.sources[ConfigFlag]; !set {
		if v, ok := lookupEnv(EnvName(ConfigFlag)); ok && v != "" {
			src := "environment variable " + EnvName(ConfigFlag)
			if err := fs.Set(ConfigFlag, v); err != nil {
				return &Error{Setting: ConfigFlag, Source: src, Err: err}
			}
			fs.sources[ConfigFlag] = src
		}
	}
	path := fs.Lookup(ConfigFlag).Value.String()
	var file []fileSetting
	if path != "" && !fs.ownConfig {
		var err error
		if file, err = readConfigFile(path); err != nil {
			return err
		}
	}
	inFile := make(map[string]fileSetting, len(file))
	for _, fv := range file {
		switch f := fs.Lookup(fv.key); {
		case fv.key == ConfigFlag:
			return fmt.Errorf("config file %s line %d: %q cannot be set in the config file", path, fv.line, fv.key)
		case f == nil:
			return fmt.Errorf("config file %s line %d: unknown setting %q (the settings of 'rollup %s' are its flags)", path, fv.line, fv.key, fs.Name())
		case fs.flagOnly[fv.key]:
			return fmt.Errorf("config file %s line %d: %q is set on the command line only", path, fv.line, fv.key)
		}
		inFile[fv.key] = fv
	}
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if _, set := fs.sources[f.Name]; set || err != nil || f.Name == ConfigFlag || fs.flagOnly[f.Name] {
			return
		}
		if v, ok := lookupEnv(EnvName(f.Name)); ok {
			src := "environment variable " + EnvName(f.Name)
			if e := fs.Set(f.Name, v); e != nil {
				err = &Error{Setting: f.Name, Source: src, Err: e}
			}
			fs.sources[f.Name] = src
			return
		}
		if fv, ok := inFile[f.Name]; ok {
			src := fmt.Sprintf("config file %s line %d", path, fv.line)
			if e := fs.Set(f.Name, fv.value); e != nil {
				err = &Error{Setting: f.Name, Source: src, Err: e}
			}
			fs.sources[f.Name] = src
		}
	})
	return err
}

// printUsage is --help: the command's text, its flags with their environment variables, the
// sources rule. Defaults are the flags' own (an environment value is never shown: it may be
// a secret).
func (fs *FlagSet) printUsage() {
	var b strings.Builder
	b.WriteString(fs.usage)
	var flags []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f) })
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	for _, f := range flags {
		typ, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(&b, "  --%s", f.Name)
		if typ != "" {
			b.WriteString(" " + typ)
		}
		b.WriteString("\n      " + strings.ReplaceAll(usage, "\n", "\n      "))
		var notes []string
		switch {
		case f.DefValue == "" || f.DefValue == "false" || f.DefValue == "0" || f.DefValue == "0s":
		case typ == "string":
			notes = append(notes, "default "+strconv.Quote(f.DefValue))
		default:
			notes = append(notes, "default "+f.DefValue)
		}
		if !fs.flagOnly[f.Name] {
			notes = append(notes, "env "+EnvName(f.Name))
		}
		if len(notes) > 0 {
			b.WriteString(" (" + strings.Join(notes, ", ") + ")")
		}
		b.WriteByte('\n')
	}
	if fs.ownConfig {
		b.WriteString("\nEvery flag marked \"env\" can also be set by that environment variable.\nPrecedence: flag > environment > default.\n")
	} else {
		b.WriteString("\n" + sourcesHelp)
	}
	_, _ = io.WriteString(fs.out, b.String())
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

// CheckListenAddr checks a host:port to listen on (an empty host is every interface).
func CheckListenAddr(addr string) error {
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
