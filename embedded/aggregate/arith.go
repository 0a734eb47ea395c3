package aggregate

import (
	"math"

	"github.com/gameops/rollup/embedded/mongoerr"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// numKind is a numeric BSON type in MongoDB's widening order (Value::getWidestNumeric).
type numKind int

const (
	kindInt numKind = iota
	kindLong
	kindDouble
	kindDecimal
)

// kindOf reports the numeric kind of v (ok false for non-numbers).
func kindOf(v any) (numKind, bool) {
	switch v.(type) {
	case int32:
		return kindInt, true
	case int64:
		return kindLong, true
	case float64:
		return kindDouble, true
	case bson.Decimal128:
		return kindDecimal, true
	}
	return 0, false
}

func widest(a, b numKind) numKind {
	if a > b {
		return a
	}
	return b
}

// toInt64 is Value::coerceToLong for int, long and double (doubles truncate toward zero and
// saturate at the int64 range).
func toInt64(v any) int64 {
	switch x := v.(type) {
	case int32:
		return int64(x)
	case int64:
		return x
	case float64:
		return truncToInt64(x)
	}
	return 0
}

func truncToInt64(f float64) int64 {
	switch {
	case math.IsNaN(f):
		return 0
	case f >= 9223372036854775807:
		return math.MaxInt64
	case f <= -9223372036854775808:
		return math.MinInt64
	}
	return int64(f)
}

// toFloat is Value::coerceToDouble for int, long and double.
func toFloat(v any) float64 {
	switch x := v.(type) {
	case int32:
		return float64(x)
	case int64:
		return float64(x)
	case float64:
		return x
	}
	return 0
}

// intOrLong is Value::createIntOrLong.
func intOrLong(n int64) any {
	if n >= math.MinInt32 && n <= math.MaxInt32 {
		return int32(n)
	}
	return n
}

// llround rounds half away from zero, as C's llround does, saturating at the int64 range.
func llround(f float64) int64 {
	return truncToInt64(math.Round(f))
}

func addOverflows(a, b int64) (int64, bool) {
	s := a + b
	return s, (a >= 0) == (b >= 0) && (s >= 0) != (a >= 0)
}

func subOverflows(a, b int64) (int64, bool) {
	s := a - b
	return s, (a >= 0) != (b >= 0) && (s >= 0) != (a >= 0)
}

func mulOverflows(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, false
	}
	p := a * b
	if (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) || p/b != a {
		return p, true
	}
	return p, false
}

func decimalUnsupported(op string) error {
	return mongoerr.NotImplementedf("Decimal128 arithmetic (%s)", op)
}

// ddSum is MongoDB's DoubleDoubleSummation: a compensated sum kept as an unevaluated pair of
// doubles, so sums of int32/int64 values stay exact and double sums are correctly rounded far
// more often than a naive loop. Matching it is what makes $sum/$avg results bit-identical.
type ddSum struct {
	sum, addend float64
	// special is a naive sum returned when sum is NaN (infinities turn into NaN otherwise).
	special float64
}

func fast2Sum(a, b float64) (float64, float64) {
	s := a + b
	z := s - a
	return s, b - z
}

func twoSum(a, b float64) (float64, float64) {
	s := a + b
	ap := s - b
	bp := s - ap
	return s, (a - ap) + (b - bp)
}

func (s *ddSum) addDouble(x float64) {
	s.special += x
	x, s.addend = fast2Sum(x, s.addend)
	s.sum, x = twoSum(s.sum, x)
	s.addend += x
}

func (s *ddSum) addLong(x int64) {
	high := x / (1 << 32) * (1 << 32)
	low := x - high
	s.addDouble(float64(low))
	s.addDouble(float64(high))
}

func (s *ddSum) double() float64 {
	if math.IsNaN(s.sum) {
		return s.special
	}
	return s.sum
}

const two63 = 9223372036854775808.0

func (s *ddSum) fitsLong() bool {
	if s.sum > -two63 && s.sum < two63 {
		return true
	}
	if s.sum == two63 {
		return s.addend < -0.5
	}
	if s.sum == -two63 {
		return s.addend >= -0.5
	}
	return false
}

// long returns the sum rounded half away from zero; call only when fitsLong.
func (s *ddSum) long() int64 {
	if s.sum == two63 {
		return llround(s.addend) - math.MinInt64
	}
	n := llround(s.sum)
	return n + llround((s.sum-float64(n))+s.addend)
}
