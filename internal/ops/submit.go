package ops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gameops/rollup/api/agentclient"
)

// Submit sends s with client and prints the answer: one line per item (index, id, type,
// status, error) and a summary, or the server's JSON (jsonOut, also for an error answer).
// Items the store rejected make it fail.
func Submit(ctx context.Context, w io.Writer, client *agentclient.Client, s agentclient.Submission, jsonOut bool) error {
	resp, err := client.Submit(ctx, s)
	if err != nil {
		var apiErr *agentclient.APIError
		if errors.As(err, &apiErr) && jsonOut {
			out, _ := json.Marshal(apiErr.Body)
			_, _ = fmt.Fprintln(w, string(out))
		}
		return err
	}
	if jsonOut {
		out, err := json.MarshalIndent(resp, "", "  ")
		if err != nil {
			return fmt.Errorf("encode answer: %w", err)
		}
		if _, err := fmt.Fprintln(w, string(out)); err != nil {
			return err
		}
	} else {
		var b strings.Builder
		for _, it := range resp.Items {
			fmt.Fprintf(&b, "%d\t%s\t%s\t%s", it.Index, it.ID, it.Type, it.Status)
			if it.Error != "" {
				fmt.Fprintf(&b, "\t%s", it.Error)
			}
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "submission %s: %d applied, %d stale, %d rejected\n",
			resp.SubmissionID, resp.Summary.Applied, resp.Summary.Stale, resp.Summary.Rejected)
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	if resp.Summary.Rejected > 0 {
		return fmt.Errorf("%d of %d items rejected by the store", resp.Summary.Rejected, len(resp.Items))
	}
	return nil
}
