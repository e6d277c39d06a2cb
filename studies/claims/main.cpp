// claims: the Batch Normalization chapter's "why" claims measured against the papers.
//   claims variance-shift --out results/variance_shift   # Li et al. 2019, Fashion-MNIST MLP
//   claims ics --out results/ics                         # Santurkar et al. 2018 Def. 2.1, deep linear net
//   claims landscape --out results/landscape             # Santurkar et al. 2018 Fig. 4, deep linear net
//   claims lr-sweep --out results/lr_sweep               # Bjorck et al. 2018, Fashion-MNIST MLP
//   claims noisy-bn --out results/noisy_bn               # Santurkar et al. 2018 Algorithm 1, both nets
//   claims ics-mlp --out results/ics_mlp                 # the same probes on the Fashion-MNIST MLP
//   claims landscape-mlp --out results/landscape_mlp
//   claims init-sweep --out results/init_sweep           # weight scale x depth, BN vs plain
//   claims reg-gap --out results/reg_gap                 # train - test gap across batch sizes, |gamma|
//   claims lr-sweep-linear --out results/lr_sweep_linear # the lr range on the deep linear network
//   claims init-sweep-linear --out results/init_sweep_linear  # the same on the deep linear network
//   claims hessian --out results/hessian                 # Ghorbani et al. 2019, Hessian spectrum over training
//   claims <subcommand> --quick                          # CI smoke test (< 60 s)
#include "commands.h"
#include "kit/cli.h"

int main(int argc, char** argv) {
  studies::kit::StudyCli cli({"claims", "The Batch Normalization chapter's 'why' claims measured against the papers", "(< 60 s)"},
                             claims::commands(studies::kit::cli_quick(argc, argv)));
  if (auto rc = cli.parse(argc, argv)) return *rc;
  return cli.run();
}
