"""SAC with automatic entropy tuning whose temperature loss reuses the policy's log-probs undetached.

Rebuilt from the structure of issue-tracker reports against Soft Actor-Critic implementations:
the policy's reparameterised action and its log-probability `log_pi` are computed once per
update, the policy loss `(alpha * log_pi - q).mean()` goes back and the policy optimizer steps,
and then the temperature loss `-(log_alpha * (log_pi + target_entropy)).mean()` is given its
own backward and step. Reference implementations write `(log_pi + target_entropy).detach()`;
without it the temperature's backward goes back into the policy's forward, which the policy
backward freed. The fix: detach `log_pi` in the temperature loss (it must train log_alpha
only). Adding the two losses and calling backward once would let the temperature loss train
the policy; retain_graph=True on the policy backward trades this error for the in-place one
(`policy_opt.step()` changes the weights that forward saved).
"""

# expect-cause: shared-forward
# expect-fix: log_pi
# expect-fix: detach
# expect-not-fix: retain_graph=True
import math

import torch
from torch import nn

torch.manual_seed(0)
obs_dim, act_dim = 5, 2
policy = nn.Sequential(nn.Linear(obs_dim, 32), nn.ReLU(), nn.Linear(32, 2 * act_dim))
critic = nn.Sequential(nn.Linear(obs_dim + act_dim, 32), nn.ReLU(), nn.Linear(32, 1))
log_alpha = torch.zeros(1, requires_grad=True)
policy_opt = torch.optim.Adam(policy.parameters(), lr=3e-4)
critic_opt = torch.optim.Adam(critic.parameters(), lr=3e-4)
alpha_opt = torch.optim.Adam([log_alpha], lr=3e-4)
target_entropy = -float(act_dim)


def sample_action(obs):
    mean, log_std = policy(obs).chunk(2, dim=-1)
    std = log_std.clamp(-5, 2).exp()
    noise = torch.randn_like(mean)
    pre_tanh = mean + std * noise
    action = torch.tanh(pre_tanh)
    log_prob = -0.5 * noise.pow(2) - log_std.clamp(-5, 2) - 0.5 * math.log(2 * math.pi)
    log_prob = log_prob - torch.log(1 - action.pow(2) + 1e-6)  # expect: forward
    return action, log_prob.sum(-1, keepdim=True)


for update in range(3):
    obs, act = torch.randn(32, obs_dim), torch.rand(32, act_dim) * 2 - 1
    target_q = torch.randn(32, 1)
    q_loss = nn.functional.mse_loss(critic(torch.cat([obs, act], 1)), target_q)
    critic_opt.zero_grad()
    q_loss.backward()
    critic_opt.step()

    action, log_pi = sample_action(obs)
    q_new = critic(torch.cat([obs, action], 1))
    alpha = log_alpha.exp().detach()
    policy_loss = (alpha * log_pi - q_new).mean()
    policy_opt.zero_grad()
    policy_loss.backward()  # expect: frees
    policy_opt.step()

    alpha_loss = -(log_alpha * (log_pi + target_entropy)).mean()
    alpha_opt.zero_grad()
    alpha_loss.backward()  # expect: raises
    alpha_opt.step()
    print(f"update {update}: pi {policy_loss.item():.4f} alpha {alpha.item():.4f}")
