package embedded

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
	"github.com/gameops/rollup/embedded/storage"
)

// preAndPostImagesArg reads {enabled: <bool>}, the changeStreamPreAndPostImages option.
func preAndPostImagesArg(v any, cmd string) (bool, error) {
	d, ok := v.(bson.D)
	if !ok {
		return false, mongoerr.TypeMismatchf("BSON field '%s.changeStreamPreAndPostImages' is the wrong type '%s', expected type 'object'", cmd, typeName(v))
	}
	enabled, found := false, false
	for _, e := range d {
		if e.Key != "enabled" {
			return false, mongoerr.New(40415, "BSON field '%s.changeStreamPreAndPostImages.%s' is an unknown field.", cmd, e.Key)
		}
		b, ok := e.Value.(bool)
		if !ok {
			return false, mongoerr.TypeMismatchf("BSON field '%s.changeStreamPreAndPostImages.enabled' is the wrong type '%s', expected type 'bool'", cmd, typeName(e.Value))
		}
		enabled, found = b, true
	}
	if !found {
		return false, mongoerr.New(40414, "BSON field '%s.changeStreamPreAndPostImages.enabled' is missing but a required field", cmd)
	}
	return enabled, nil
}

// optionsDoc renders collection options as listCollections and change events show them.
func optionsDoc(o storage.CollOptions) bson.D {
	if !o.PreAndPostImages {
		return bson.D{}
	}
	return bson.D{{Key: "changeStreamPreAndPostImages", Value: bson.D{{Key: "enabled", Value: true}}}}
}

// parseIndexSpec validates one createIndexes entry; options outside the subset are refused.
func parseIndexSpec(v any) (storage.IndexSpec, error) {
	d, ok := v.(bson.D)
	if !ok {
		return storage.IndexSpec{}, mongoerr.TypeMismatchf("each index specification must be an object")
	}
	var spec storage.IndexSpec
	for _, e := range d {
		switch e.Key {
		case "key":
			k, ok := e.Value.(bson.D)
			if !ok || len(k) == 0 {
				return spec, mongoerr.New(mongoerr.CannotCreateIndex, "Index keys cannot be empty.")
			}
			spec.Key = k
		case "name":
			n, ok := e.Value.(string)
			if !ok || n == "" {
				return spec, mongoerr.New(mongoerr.CannotCreateIndex, "The index name must be a non-empty string")
			}
			spec.Name = n
		case "unique":
			spec.Unique = boolArg(e.Value)
		case "expireAfterSeconds":
			secs, err := expireAfterSecondsArg(e.Value, d)
			if err != nil {
				return spec, err
			}
			spec.TTL, spec.ExpireAfterSeconds = true, secs
		case "background":
			// Ignored since 4.2, but kept: listIndexes shows it.
			spec.Background = boolArg(e.Value)
		case "v", "ns":
			// v is always 2; ns is legacy.
		default:
			return spec, mongoerr.NotImplementedf("index option '%s'", e.Key)
		}
	}
	if spec.Key == nil {
		return spec, mongoerr.FailedToParsef("The 'key' field is a required property of an index specification")
	}
	if spec.Name == "" {
		return spec, mongoerr.FailedToParsef("The 'name' field is a required property of an index specification")
	}
	return spec, nil
}

// expireAfterSecondsArg reads a TTL index's expireAfterSeconds as createIndexes does: any
// number, truncated to an integer, within [0, storage.MaxExpireAfterSeconds].
func expireAfterSecondsArg(v any, spec bson.D) (int64, error) {
	f, ok := bsonval.ToFloat(v)
	if !ok {
		return 0, mongoerr.New(mongoerr.CannotCreateIndex, "TTL index 'expireAfterSeconds' option must be numeric, but received a type of '%s'. Index spec: %s",
			typeName(v), bsonval.Format(spec))
	}
	if math.IsNaN(f) || f > storage.MaxExpireAfterSeconds {
		return 0, mongoerr.New(mongoerr.InvalidOptions, "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number")
	}
	if f < 0 {
		return 0, mongoerr.New(mongoerr.InvalidOptions, "TTL index 'expireAfterSeconds' option cannot be less than 0")
	}
	return int64(f), nil
}

func indexDoc(spec storage.IndexSpec) bson.D {
	d := bson.D{{Key: "v", Value: int32(2)}, {Key: "key", Value: spec.Key}, {Key: "name", Value: spec.Name}}
	// The _id index is unique by nature; mongod does not list a unique field for it.
	if spec.Unique && spec.Name != "_id_" {
		d = append(d, bson.E{Key: "unique", Value: true})
	}
	if spec.TTL {
		d = append(d, bson.E{Key: "expireAfterSeconds", Value: int32(spec.ExpireAfterSeconds)})
	}
	if spec.Background {
		d = append(d, bson.E{Key: "background", Value: true})
	}
	return d
}
