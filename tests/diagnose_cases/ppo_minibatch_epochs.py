"""PPO whose advantages are computed once per update from the critic, then reused by minibatches.

Rebuilt from the structure of issue-tracker reports against (MA)PPO implementations that crash
as soon as the number of PPO epochs is above one: the update evaluates the critic on the whole
rollout with grad on, takes `advantages = returns - values` (normalised) outside the epoch and
minibatch loops, and each minibatch's actor loss slices its advantages out of that tensor. The
first minibatch's backward goes through the slice into the critic's rollout-wide forward and
frees it; the next minibatch's slice leads back into the same freed graph. The old log-probs
are taken under torch.no_grad() as they should be. The fix: the advantages are constants of
the update, `advantages = advantages.detach()` (or compute them under torch.no_grad()); the
critic still trains through its own fresh `critic(obs[idx])` in the value loss. Computing the
advantages afresh inside the loop, with grad, would run but let the policy loss train the
critic; retain_graph=True trades the error for the in-place one (opt.step() changes the
critic weights that graph saved).
"""

# expect-cause: carried-state
# expect-fix: advantages
# expect-not-fix: retain_graph
# expect-not-fix: inside the loop
import torch
from torch import nn
from torch.distributions import Categorical

torch.manual_seed(0)
obs_dim, n_actions, steps = 6, 3, 64
actor = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh(), nn.Linear(32, n_actions))
critic = nn.Sequential(nn.Linear(obs_dim, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.Adam([*actor.parameters(), *critic.parameters()], lr=3e-4)
clip, ppo_epochs, minibatch = 0.2, 2, 16


def discounted(rewards, dones, gamma=0.99):
    out, running = torch.zeros_like(rewards), 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running * (1 - dones[t])
        out[t] = running
    return out


for update in range(2):
    obs = torch.randn(steps, obs_dim)
    with torch.no_grad():
        dist = Categorical(logits=actor(obs))
        actions = dist.sample()
        old_log_probs = dist.log_prob(actions)
    rewards, dones = torch.randn(steps), (torch.rand(steps) < 0.05).float()
    returns = discounted(rewards, dones)
    values = critic(obs).squeeze(-1)
    advantages = returns - values
    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)  # expect: forward
    for epoch in range(ppo_epochs):
        for idx in torch.randperm(steps).split(minibatch):
            dist = Categorical(logits=actor(obs[idx]))
            ratio = torch.exp(dist.log_prob(actions[idx]) - old_log_probs[idx])
            surr1 = ratio * advantages[idx]
            surr2 = torch.clamp(ratio, 1 - clip, 1 + clip) * advantages[idx]
            policy_loss = -torch.min(surr1, surr2).mean()
            value_loss = (critic(obs[idx]).squeeze(-1) - returns[idx]).pow(2).mean()
            loss = policy_loss + 0.5 * value_loss - 0.01 * dist.entropy().mean()
            opt.zero_grad()
            loss.backward()  # expect: raises frees
            opt.step()
        print(f"update {update} epoch {epoch}: {loss.item():.5f}")
