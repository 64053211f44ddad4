package spec

// LoadOptions are the options of a part that drives an HTTP load itself
// and counts the window's requests (async-profiler, goalloc).
var LoadOptions = []Option{
	{Name: "requests", Domain: Domain{Kind: KindInt, Min: Bound(0)}, Doc: "requests served in the window (sent by you, or by perfscope with load)"},
	{Name: "load", Domain: Domain{Kind: KindURL}, Doc: "drive `requests` HTTP requests at this URL and measure while they run"},
	{Name: "method", Domain: Domain{Kind: KindEnum, Values: HTTPMethods}, Default: "GET", Doc: "HTTP method of the load"},
	{Name: "body", Domain: Domain{Kind: KindString}, Doc: "request body of the load"},
	{Name: "body_file", Domain: Domain{Kind: KindFile}, Doc: "read the load's request body from this file"},
	{Name: "header", Domain: Domain{Kind: KindList}, Doc: "request headers of the load, Name:value each"},
	{Name: "concurrency", Domain: Domain{Kind: KindInt, Min: Bound(1), Max: Bound(1024)}, Default: int64(4), Doc: "concurrent connections of the load"},
}

// Options joins lists of options into one, in order.
func Options(lists ...[]Option) []Option {
	var out []Option
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
