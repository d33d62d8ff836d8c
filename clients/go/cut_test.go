package boardd

import "testing"

func TestCutUTF8(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{{"abc", 5, "abc"}, {"abc", 2, "ab"}, {"a€b", 3, "a"}, {"a€b", 4, "a€"}, {"a\xffb", 3, "a"},
		{"a\xffbc", 9, "a\uFFFDbc"}} {
		if got := cutUTF8(c.in, c.n); got != c.want {
			t.Errorf("cutUTF8(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
