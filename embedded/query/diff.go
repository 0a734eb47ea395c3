package query

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// DiffDocs describes how after differs from before as a change-stream update event does:
// the dotted paths whose values were set (new fields, and fields whose value changed, by
// recursing into embedded documents present in both) and the paths removed. Arrays and
// other values that changed are reported whole. It is the description of updates that are
// computed as whole documents (pipeline-style updates).
func DiffDocs(before, after bson.D) UpdateDescription {
	var desc UpdateDescription
	diffInto(&desc, before, after, "")
	return desc
}

func diffInto(desc *UpdateDescription, before, after bson.D, prefix string) {
	for _, e := range after {
		old, ok := getField(before, e.Key)
		switch {
		case !ok:
			desc.UpdatedFields = append(desc.UpdatedFields, bson.E{Key: prefix + e.Key, Value: e.Value})
		case strictEqual(old, e.Value):
		default:
			od, oIsDoc := old.(bson.D)
			nd, nIsDoc := e.Value.(bson.D)
			if oIsDoc && nIsDoc {
				diffInto(desc, od, nd, prefix+e.Key+".")
				continue
			}
			desc.UpdatedFields = append(desc.UpdatedFields, bson.E{Key: prefix + e.Key, Value: e.Value})
		}
	}
	for _, e := range before {
		if _, ok := getField(after, e.Key); !ok {
			desc.RemovedFields = append(desc.RemovedFields, prefix+e.Key)
		}
	}
}
