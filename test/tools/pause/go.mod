module portico.dev/test/tools/pause

go 1.26.0
