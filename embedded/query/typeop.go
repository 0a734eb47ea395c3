package query

import (
	"math"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/gameops/rollup/embedded/bsonval"
	"github.com/gameops/rollup/embedded/mongoerr"
)

// typeSet is the set of BSON types a $type operator accepts (MatcherTypeSet).
type typeSet struct {
	number bool           // the "number" alias: double, int, long and decimal
	types  map[int32]bool // BSON type numbers
}

// typePred is {$type: ...}: the value's BSON type is in the set. A missing field has no type.
type typePred struct{ set typeSet }

func (p typePred) test(v any, missing bool) bool {
	if missing {
		return false
	}
	return p.set.has(v)
}

func (s typeSet) has(v any) bool {
	n := bsonval.TypeNumber(v)
	if s.number {
		switch n {
		case 1, 16, 18, 19:
			return true
		}
	}
	return s.types[n]
}

// parseTypeSet parses the argument of $type: a type alias, a type number, or a non-empty array
// of them (MatcherTypeSet::parse), with mongod's error codes.
func parseTypeSet(v any) (typeSet, error) {
	s := typeSet{types: map[int32]bool{}}
	arr, isArr := v.(bson.A)
	if !isArr {
		arr = bson.A{v}
	} else if len(arr) == 0 {
		return s, mongoerr.FailedToParsef("$type must match at least one type")
	}
	for _, x := range arr {
		if err := s.add(x); err != nil {
			return s, err
		}
	}
	return s, nil
}

func (s *typeSet) add(v any) error {
	switch x := v.(type) {
	case string:
		if x == "number" {
			s.number = true
			return nil
		}
		n, ok := bsonval.TypeByAlias(x)
		if !ok {
			return mongoerr.BadValuef("Unknown type name alias: %s", x)
		}
		s.types[n] = true
		return nil
	case int32, int64, float64, bson.Decimal128, int:
		f, _ := bsonval.ToFloat(x)
		if f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
			return mongoerr.BadValuef("Invalid numerical type code: %s", formatValue(x))
		}
		n := int32(f)
		if !validTypeNumber(n) {
			return mongoerr.BadValuef("Invalid numerical type code: %d", n)
		}
		s.types[n] = true
		return nil
	}
	return mongoerr.TypeMismatchf("type must be represented as a number or a string")
}

func validTypeNumber(n int32) bool {
	return (n >= 1 && n <= 19) || n == -1 || n == 127
}
