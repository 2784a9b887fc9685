package main

import "github.com/spf13/cobra"

func addClientCommands(root *cobra.Command) {}
