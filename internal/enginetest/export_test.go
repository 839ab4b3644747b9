package enginetest

// BuildImage is buildImage without the per-process cache: what a second
// test binary does.
var BuildImage = buildImage
