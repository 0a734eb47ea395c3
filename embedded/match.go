package embedded

import (
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/query"
	"github.com/gameops/rollup/embedded/storage"
)

// matched is a stored document that matched a filter, and its decoded form once asked for
// (full): the filter reads only the fields it names (query.Filter.TopFields), so a find that
// returns the stored bytes never decodes a large document whole. The decoded form is the
// caller's: storage keeps documents encoded only.
type matched struct {
	doc *storage.Doc
	d   bson.D
	key []any // sort key (sortMatched)
}

// full returns the whole document decoded, decoding it on the first call.
func (m *matched) full() bson.D {
	if m.d == nil {
		m.d = m.doc.D()
	}
	return m.d
}

// sortMatched sorts matches by srt (stable), the sort key of each read once from the fields
// the sort reads (or the whole document when it is already decoded).
func sortMatched(matches []matched, srt *query.Sort) {
	fields := srt.TopFields()
	for i := range matches {
		m := &matches[i]
		d := m.d
		if d == nil {
			d = m.doc.Fields(fields)
		}
		m.key = srt.Key(d)
	}
	sort.SliceStable(matches, func(i, j int) bool { return srt.CompareKeys(matches[i].key, matches[j].key) < 0 })
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
	fields, partial := filter.TopFields()
	return func(doc *storage.Doc) bool {
		var d bson.D
		if partial {
			d = doc.Fields(fields)
		} else {
			d = doc.D()
		}
		ok, err := filter.Match(d)
		if err != nil {
			*matchErr = err
			return false
		}
		if ok {
			m := matched{doc: doc}
			if !partial {
				m.d = d
			}
			*matches = append(*matches, m)
		}
		return limit <= 0 || len(*matches) < limit
	}
}

// findOne returns the first document matching filter, in sort order when sort is given (nil
// when none matches). pt, when not nil, is the filter's find planned before the Write
// (findTargets): it finds at most one document, so the sort does not matter.
func findOne(rd *storage.Reader, db, coll string, q bson.D, filter *query.Filter, srt *query.Sort, pt *storage.PointLookup) (*matched, error) {
	limit := 1
	if srt != nil {
		limit = 0
	}
	matches, err := findTargets(rd, db, coll, q, filter, limit, pt)
	if err != nil || len(matches) == 0 {
		return nil, err
	}
	if srt != nil {
		sortMatched(matches, srt)
	}
	return &matches[0], nil
}
