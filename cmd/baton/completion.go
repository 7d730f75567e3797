package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// The bash script cobra generates calls _get_comp_words_by_ref and _filedir
// of the bash-completion package, which a plain bash lacks. bashCompletion
// routes those calls through functions of its own that use the package when
// it is loaded and plain bash otherwise.

// bashPrelude defines the stand-ins. Without bash-completion the words are
// the line up to the cursor split on blanks, so that "=" and ":" (which
// COMP_WORDS splits on) stay inside a word, as -n =: asks.
const bashPrelude = `# Stand-ins for the bash-completion package, used when it is not loaded.
__baton_comp_words()
{
    if declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
        _get_comp_words_by_ref "$@" cur prev words cword
        return
    fi
    local line=${COMP_LINE:0:COMP_POINT}
    read -r -a words <<< "$line"
    if [[ -z $line || $line == *[[:space:]] ]]; then
        words+=("")
    fi
    cword=$(( ${#words[@]} - 1 ))
    cur=${words[cword]}
    prev=
    if (( cword > 0 )); then
        prev=${words[cword-1]}
    fi
}

__baton_filedir()
{
    if declare -F _filedir >/dev/null 2>&1; then
        _filedir "$@"
        return
    fi
    local IFS=$'\n'
    if [[ ${1-} == -d ]]; then
        COMPREPLY=( $(compgen -d -- "$cur") )
    else
        COMPREPLY=( $(compgen -f -- "$cur") )
    fi
}

`

// bashCompletion writes cobra's bash script for root with the calls into
// bash-completion replaced by the stand-ins.
func bashCompletion(root *cobra.Command, descriptions bool) ([]byte, error) {
	var b bytes.Buffer
	if err := root.GenBashCompletionV2(&b, descriptions); err != nil {
		return nil, err
	}
	s := b.String()
	s = strings.ReplaceAll(s, `_get_comp_words_by_ref "$@" cur prev words cword`, `__baton_comp_words "$@"`)
	s = strings.ReplaceAll(s, "_filedir", "__baton_filedir")
	if strings.Contains(strings.ReplaceAll(s, "__baton_filedir", ""), "_filedir") ||
		strings.Contains(s, "_get_comp_words_by_ref ") {
		return nil, fmt.Errorf("bash completion: the generated script calls bash-completion in an unexpected way")
	}
	head, rest, ok := strings.Cut(s, "\n")
	if !ok {
		return nil, fmt.Errorf("bash completion: empty script")
	}
	return []byte(head + "\n\n" + bashPrelude + rest), nil
}

// useOwnBashCompletion makes "baton completion bash" print bashCompletion.
func useOwnBashCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		for _, sub := range c.Commands() {
			if sub.Name() != "bash" {
				continue
			}
			sub.Long = `Generate the completion script for bash. It works in a plain bash and
uses the bash-completion package when that is loaded.

To load completions in the current shell:

	source <(baton completion bash)

For every new shell, add that line to ~/.bashrc, or write the script to
/etc/bash_completion.d/baton (or ~/.local/share/bash-completion/completions/baton).`
			sub.RunE = func(cmd *cobra.Command, args []string) error {
				noDesc, _ := cmd.Flags().GetBool("no-descriptions")
				script, err := bashCompletion(cmd.Root(), !noDesc)
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(script)
				return err
			}
		}
	}
}
