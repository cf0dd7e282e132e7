//go:build !rekeytest

package main

// testUnfenced is the end-to-end tests' switch that turns the fence off
// (unfenced_rekeytest.go). A build without the rekeytest tag — every
// build users run — has no such switch: the fence cannot be turned off.
func testUnfenced() string { return "" }
