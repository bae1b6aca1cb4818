module github.com/kvselect/kvselect/jepsen

go 1.26.0

replace github.com/kvselect/kvselect => ../
