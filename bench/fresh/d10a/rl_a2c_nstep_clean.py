# expect-cause: none
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
OBS, ACTIONS, HID, NUM_STEPS, NUM_ENVS, GAMMA = 6, 3, 32, 5, 4, 0.99


class VecEnv:
    def __init__(self):
        self.state = torch.randn(NUM_ENVS, OBS)

    def step(self, actions):
        reward = (actions == self.state[:, :ACTIONS].argmax(1)).float()
        self.state = 0.8 * self.state + 0.2 * torch.randn(NUM_ENVS, OBS)
        done = torch.rand(NUM_ENVS) < 0.1
        return self.state, reward, done


class RecurrentActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRUCell(OBS, HID)
        self.actor = nn.Linear(HID, ACTIONS)
        self.critic = nn.Linear(HID, 1)

    def forward(self, obs, hxs, masks):
        hxs = self.gru(obs, hxs * masks.unsqueeze(1))
        return self.actor(hxs), self.critic(hxs).squeeze(1), hxs


env, ac = VecEnv(), RecurrentActorCritic()
actor_opt = torch.optim.RMSprop(list(ac.gru.parameters()) + list(ac.actor.parameters()), lr=7e-4)
critic_opt = torch.optim.RMSprop(ac.critic.parameters(), lr=7e-4)
obs, hxs, masks = env.state, torch.zeros(NUM_ENVS, HID), torch.ones(NUM_ENVS)

for update in range(20):
    hxs = hxs.detach()
    log_probs, values, rewards, step_masks, entropies = [], [], [], [], []
    for step in range(NUM_STEPS):
        logits, value, hxs = ac(obs, hxs, masks)
        dist = torch.distributions.Categorical(logits=logits)
        action = dist.sample()
        obs, reward, done = env.step(action)
        masks = (~done).float()
        log_probs.append(dist.log_prob(action))
        entropies.append(dist.entropy())
        values.append(value)
        rewards.append(reward)
        step_masks.append(masks)
    with torch.no_grad():
        _, next_value, _ = ac(obs, hxs, masks)
    returns, R = [], next_value
    for r, m in zip(reversed(rewards), reversed(step_masks)):
        R = r + GAMMA * R * m
        returns.insert(0, R)
    returns, values = torch.stack(returns), torch.stack(values)
    advantages = returns - values
    actor_loss = -(advantages.detach() * torch.stack(log_probs)).mean() - 0.01 * torch.stack(entropies).mean()
    value_loss = advantages.pow(2).mean()
    actor_opt.zero_grad()
    critic_opt.zero_grad()
    actor_loss.backward(retain_graph=True)
    value_loss.backward()
    actor_opt.step()
    critic_opt.step()
    if update % 5 == 0:
        print(f"update {update} actor {actor_loss.item():.3f} value {value_loss.item():.3f}")
