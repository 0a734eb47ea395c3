package embedded

import (
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/query"
	"github.com/gameops/rollup/embedded/storage"
)

// matched is a stored document that matched a filter, and its decoded form (the filter's
// input, which the caller owns: storage keeps documents encoded only).
type matched struct {
	doc *storage.Doc
	d   bson.D
}

// findMatching returns the documents of db.coll that match filter (compiled from q), in the
// order storage yields candidates, at most limit of them (limit <= 0: all). A failure
// evaluating the filter ($expr) stops the scan and is returned.
func findMatching(rd *storage.Reader, db, coll string, q bson.D, filter *query.Filter, limit int) ([]matched, error) {
	var matches []matched
	var matchErr error
	rd.Find(db, coll, q, matchInto(&matches, &matchErr, filter, limit))
	return matches, matchErr
}

// matchInto returns the callback of a storage find that appends the candidates matching
// filter to matches, until limit of them (0: no limit) or a match error (set in matchErr).
func matchInto(matches *[]matched, matchErr *error, filter *query.Filter, limit int) func(doc *storage.Doc) bool {
	return func(doc *storage.Doc) bool {
		d := doc.D()
		ok, err := filter.Match(d)
		if err != nil {
			*matchErr = err
			return false
		}
		if ok {
			*matches = append(*matches, matched{doc: doc, d: d})
		}
		return limit <= 0 || len(*matches) < limit
	}
}

// findOne returns the first document matching filter, in sort order when sort is given (nil
// when none matches).
func findOne(rd *storage.Reader, db, coll string, q bson.D, filter *query.Filter, srt *query.Sort) (*matched, error) {
	limit := 1
	if srt != nil {
		limit = 0
	}
	matches, err := findMatching(rd, db, coll, q, filter, limit)
	if err != nil || len(matches) == 0 {
		return nil, err
	}
	if srt != nil {
		sort.SliceStable(matches, func(i, j int) bool { return srt.Compare(matches[i].d, matches[j].d) < 0 })
	}
	return &matches[0], nil
}
