// Interface of the `recurrent` layer-group kind (SSM / Mamba conv + scan state, Gated DeltaNet).
// Design only: it lands with the hybrid-model issue; nothing implements it yet.
//
// A recurrent layer has no per-token K/V: it carries a fixed-size state per sequence (the conv
// window of the last `conv_kernel - 1` inputs and the recurrent matrix), updated by every token.
// What the block layer gives attention KV, this gives that state:
//
// - Slots: a pool of fixed-size state slots per recurrent group (one allocation sized by the
//   budget, like a block pool), one live slot per sequence. Joining and leaving a batch moves
//   no state: kernels read slot ids per row (the seeds' merge/filter of ArraysCache become slot
//   bookkeeping).
// - Checkpoints at block boundaries: after a step crosses position k·block_tokens the state at
//   exactly that position is copied into a checkpoint slot (the kernel emits it mid-chunk). A
//   sequence's checkpoints play the role of its block table: prefix caching shares them by the
//   same block hashes as attention blocks (a hit restores the state at the last matched
//   boundary and recomputes the remainder), and rollback restores the newest checkpoint at or
//   below the target position and replays the accepted tokens (speculative decoding), or keeps
//   a per-token checkpoint ring of `lookahead` entries for the draft tokens.
// - Padding: rows never carry padding here (each row's tokens are its own), so the seeds'
//   SsmPrefillPadding (masking pad tokens out of the state update) has no counterpart.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace ringlm::kv {

struct RecurrentStateSpec {
  int64_t conv_state_bytes = 0;       // per layer: (conv_kernel - 1) × conv channels × dtype
  int64_t recurrent_state_bytes = 0;  // per layer: heads × head_k_dim × head_v_dim × dtype
  std::vector<int> layers;            // model layers of the group
  int checkpoints_per_sequence = 0;   // boundary checkpoints a sequence may hold (0: none)
};

// Per-step view a recurrent kernel reads: for each row its live slot (state in, state out) and,
// for rows crossing block boundaries, where to store the boundary states.
struct RecurrentStepView {
  const int32_t* live_slot = nullptr;         // [rows]
  const int32_t* checkpoint_slot = nullptr;   // [total boundary crossings]
  const int32_t* checkpoint_token = nullptr;  // [total crossings]: flattened token index after
                                              // which the state is captured
  const int32_t* checkpoint_begin = nullptr;  // [rows + 1]: row r's crossings
  Tensor conv;                                // [slots, layers, conv_state_bytes] (byte view)
  Tensor recurrent;                           // [slots, layers, recurrent_state_bytes]
};

// The operations PagedKvCache gains for a recurrent group (declared here, implemented later):
//   int32_t live_slot(SequenceId, int group);
//   bool append(...)            also reserves checkpoint slots for the boundaries the step crosses
//   void rollback(seq, k)       restore the newest checkpoint <= length - k, return the tokens to
//                               replay (the caller re-runs them before the next step)
//   SequenceId fork(seq)        copies the live slot (state is small), shares checkpoints by
//                               reference count
//   extract / save / load       the live state and the checkpoints, with their positions

}  // namespace ringlm::kv
