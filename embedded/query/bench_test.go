package query

import (
	"testing"
)

func BenchmarkCompileFilterMatch(b *testing.B) {
	doc := D{e("_id", "abc"), e("id", "x"), e("type", "p"), e("timestamp", int64(1700000000)), e("online", int32(3)), e("version", "1.2.3")}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f, err := CompileFilter(D{e("id", "x"), e("type", "p"), e("timestamp", int64(1700000000))})
		if err != nil {
			b.Fatal(err)
		}
		if ok, _ := f.Match(doc); !ok {
			b.Fatal("no match")
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	doc := D{e("_id", "abc"), e("id", "x"), e("type", "p"), e("timestamp", int64(1700000000)), e("online", int32(3)), e("version", "1.2.3")}
	f, err := CompileFilter(D{e("id", "x"), e("type", "p"), e("timestamp", int64(1700000000))})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := f.Match(doc); !ok {
			b.Fatal("no match")
		}
	}
}

func BenchmarkCompileUpdateApply(b *testing.B) {
	doc := D{e("_id", "abc"), e("id", "x"), e("type", "p"), e("timestamp", int64(1700000000)), e("online", int32(3)), e("version", "1.2.3")}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		u, err := CompileUpdate(D{e("$set", D{e("online", int32(i)), e("version", "1.2.4")})})
		if err != nil {
			b.Fatal(err)
		}
		if _, _, _, err := u.Apply(doc, false); err != nil {
			b.Fatal(err)
		}
	}
}
