package storage

import "go.mongodb.org/mongo-driver/v2/bson"

// PlanInfo says how Find would read a query, for explain.
type PlanInfo struct {
	// Exists is false when the collection does not exist (an EOF plan).
	Exists bool
	// Index is the index Find scans, nil for a collection scan (the _id index in _id order).
	Index *IndexSpec
	// InOrder reports that FindInOrder yields the documents in the order of the sort path
	// asked about, so no sort is needed.
	InOrder bool
}

// Plan returns how Find (and FindInOrder for sortPath, when not "") would read filter over
// db.coll.
func (r *Reader) Plan(db, coll string, filter bson.D, sortPath string) PlanInfo {
	c := r.e.st.coll(db, coll)
	if c == nil {
		return PlanInfo{}
	}
	p := c.planFor(filter, &r.conds)
	info := PlanInfo{Exists: true, InOrder: sortPath != "" && p.inOrderOf(sortPath)}
	if p.ix != nil {
		spec := cloneSpec(p.ix.spec)
		info.Index = &spec
	}
	return info
}
