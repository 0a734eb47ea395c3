package aggregate

import (
	"strings"

	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Output is what a pipeline's final $out or $merge stage asks for: the caller writes the
// pipeline's results to the target collection (Run returns them; the stage itself does no
// I/O).
type Output struct {
	// Stage is "$out" or "$merge".
	Stage string
	// DB is the target database ("" means the aggregate's own); Coll the target collection.
	DB, Coll string
	// On lists the fields that identify the target document of a result ($merge; ["_id"] by
	// default).
	On []string
	// WhenMatched is "merge" (the default), "replace", "keepExisting" or "fail" ($merge).
	WhenMatched string
	// WhenNotMatched is "insert" (the default), "discard" or "fail" ($merge).
	WhenNotMatched string
}

// Output returns the pipeline's $out or $merge stage, or nil when it has none.
func (p *Pipeline) Output() *Output { return p.output }

// parseOutput parses a $out or $merge stage; it must be the pipeline's last stage.
func parseOutput(name string, arg any, last bool) (*Output, error) {
	if !last {
		return nil, mongoerr.New(40601, "%s can only be the final stage in the pipeline", name)
	}
	if name == "$out" {
		return parseOut(arg)
	}
	return parseMerge(arg)
}

func parseOut(arg any) (*Output, error) {
	o := &Output{Stage: "$out"}
	switch x := arg.(type) {
	case string:
		o.Coll = x
	case bson.D:
		for _, e := range x {
			switch e.Key {
			case "db", "coll":
				s, ok := e.Value.(string)
				if !ok {
					return nil, mongoerr.TypeMismatchf("BSON field '$out.%s' is the wrong type '%s', expected type 'string'", e.Key, typeName(normalizeLiteral(e.Value)))
				}
				if e.Key == "db" {
					o.DB = s
				} else {
					o.Coll = s
				}
			case "timeseries":
				return nil, mongoerr.NotImplementedf("$out option 'timeseries'")
			default:
				return nil, mongoerr.New(mongoerr.IDLUnknownField, "BSON field '$out.%s' is an unknown field.", e.Key)
			}
		}
		if o.Coll == "" {
			return nil, mongoerr.New(40414, "BSON field '$out.coll' is missing but a required field")
		}
	default:
		return nil, mongoerr.New(16990, "$out only supports a string or object argument, but found %s", typeName(normalizeLiteral(arg)))
	}
	return o, checkOutputName(o)
}

func parseMerge(arg any) (*Output, error) {
	o := &Output{Stage: "$merge", On: []string{"_id"}, WhenMatched: "merge", WhenNotMatched: "insert"}
	switch x := arg.(type) {
	case string:
		o.Coll = x
		return o, checkOutputName(o)
	case bson.D:
	default:
		return nil, mongoerr.New(51182, "$merge only supports a string or object argument, not %s", typeName(normalizeLiteral(arg)))
	}
	for _, e := range arg.(bson.D) {
		switch e.Key {
		case "into":
			switch v := e.Value.(type) {
			case string:
				o.Coll = v
			case bson.D:
				for _, f := range v {
					s, ok := f.Value.(string)
					if !ok || (f.Key != "db" && f.Key != "coll") {
						return nil, mongoerr.FailedToParsef("$merge 'into' must be a string or an object {db, coll} of strings")
					}
					if f.Key == "db" {
						o.DB = s
					} else {
						o.Coll = s
					}
				}
			default:
				return nil, mongoerr.New(51178, "$merge 'into' field  must be either a string or an object, but found %s", typeName(normalizeLiteral(e.Value)))
			}
		case "on":
			on, err := mergeOn(e.Value)
			if err != nil {
				return nil, err
			}
			o.On = on
		case "whenMatched":
			switch v := e.Value.(type) {
			case string:
				switch v {
				case "merge", "replace", "keepExisting", "fail":
					o.WhenMatched = v
				default:
					return nil, mongoerr.BadValuef("Enumeration value '%s' for field '$merge.whenMatched' is not a valid value.", v)
				}
			case bson.A:
				return nil, mongoerr.NotImplementedf("$merge whenMatched with a pipeline")
			default:
				return nil, mongoerr.New(51191, "$merge 'whenMatched' field must be either a string or an array, but found %s", typeName(normalizeLiteral(e.Value)))
			}
		case "whenNotMatched":
			v, _ := e.Value.(string)
			switch v {
			case "insert", "discard", "fail":
				o.WhenNotMatched = v
			default:
				return nil, mongoerr.BadValuef("Enumeration value '%v' for field '$merge.whenNotMatched' is not a valid value.", e.Value)
			}
		case "let":
			return nil, mongoerr.NotImplementedf("$merge option 'let'")
		case "targetCollectionVersion":
			return nil, mongoerr.NotImplementedf("$merge option 'targetCollectionVersion'")
		default:
			return nil, mongoerr.New(mongoerr.IDLUnknownField, "BSON field '$merge.%s' is an unknown field.", e.Key)
		}
	}
	if o.Coll == "" {
		return nil, mongoerr.New(40414, "BSON field '$merge.into' is missing but a required field")
	}
	return o, checkOutputName(o)
}

// mergeOn reads $merge's on: a field path or a non-empty array of distinct ones.
func mergeOn(v any) ([]string, error) {
	var raw bson.A
	switch x := v.(type) {
	case string:
		raw = bson.A{x}
	case bson.A:
		if len(x) == 0 {
			return nil, mongoerr.New(51187, "If explicitly specifying $merge 'on', must include at least one field")
		}
		raw = x
	default:
		return nil, mongoerr.New(51186, "$merge 'on' field  must be either a string or an array of strings, but found %s", typeName(normalizeLiteral(v)))
	}
	out := make([]string, 0, len(raw))
	for _, r := range raw {
		s, ok := r.(string)
		if !ok {
			return nil, mongoerr.New(51134, "$merge 'on' array elements must be strings, but found %s", typeName(normalizeLiteral(r)))
		}
		if _, err := parseFieldPath(s); err != nil {
			return nil, err
		}
		for _, p := range out {
			if p == s {
				return nil, mongoerr.New(31465, "Found a duplicate field '%s'", s)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func checkOutputName(o *Output) error {
	if o.Coll == "" || strings.ContainsAny(o.Coll, "$\x00") || strings.HasPrefix(o.Coll, "system.") {
		return mongoerr.New(mongoerr.InvalidNamespace, "Invalid %s target namespace: '%s'", o.Stage, o.Coll)
	}
	return nil
}
