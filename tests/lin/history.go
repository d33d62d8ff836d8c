// A recorded history on disk (JSON lines): a first line {"exact": bool} (the model's epoch
// rule), then one operation per line. lin -out FILE writes it; lin -check FILE checks it
// again, offline.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/anishathalye/porcupine"
)

type fileHeader struct {
	Exact bool `json:"exact"`
}

type fileOp struct {
	Client int    `json:"client"`
	Call   int64  `json:"call"`
	Return int64  `json:"return"`
	In     Input  `json:"in"`
	Out    Output `json:"out"`
}

func writeHistory(path string, h []porcupine.Operation, exact bool) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	if err := enc.Encode(fileHeader{Exact: exact}); err != nil {
		f.Close()
		return err
	}
	for _, op := range h {
		if err := enc.Encode(fileOp{Client: op.ClientId, Call: op.Call, Return: op.Return,
			In: op.Input.(Input), Out: op.Output.(Output)}); err != nil {
			f.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readHistory(path string) ([]porcupine.Operation, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReader(f))
	var hd fileHeader
	if err := dec.Decode(&hd); err != nil {
		return nil, false, fmt.Errorf("%s: header: %w", path, err)
	}
	var h []porcupine.Operation
	for dec.More() {
		var op fileOp
		if err := dec.Decode(&op); err != nil {
			return nil, false, fmt.Errorf("%s: op %d: %w", path, len(h), err)
		}
		h = append(h, porcupine.Operation{ClientId: op.Client, Input: op.In, Output: op.Out,
			Call: op.Call, Return: op.Return})
	}
	return h, hd.Exact, nil
}
